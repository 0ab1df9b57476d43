-- Fingerprint ad-hoc texts with the same functions the job uses, and compare them.
--   neardup sql -f sql/examples/fingerprint_a_text.sql
SELECT hamming(simhash(tokenize(a)), simhash(tokenize(b))) AS hamming,
       simhash_similarity(simhash(tokenize(a)), simhash(tokenize(b))) AS similarity
FROM (VALUES ('今天北京天气晴朗，适合出门散步。', '今天北京天气晴朗,适合出门散步!')) AS t(a, b);
