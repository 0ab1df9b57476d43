-- Stage 3: weights and SimHash, one document at a time. idf_simhash weighs
-- every term of a document's term_stats with its document frequency from
-- the df table at {{model}} (read once per process) and sums the votes for
-- the bits of each term's hash in fixed point, so the fingerprint does not
-- depend on partitioning. The weight, for weighting 'improved' (the
-- default), is
--   tf · idf(df, N) · (1 + cx + len + logo + title)
-- and tf · idf, the raw count, or 1 for 'tfidf', 'tf' and 'none'; a term
-- missing from the table counts as df = 1. With a top-K setting only each
-- document's K heaviest terms vote (ties by hash). This is the same
-- fingerprint as
--   SELECT source, id, simhash_agg(t['hash'], term_weight(t, d.df, N, …))
--   FROM (SELECT source, id, unnest(terms) AS t FROM terms)
--   LEFT JOIN df d ON d.hash = t['hash'] GROUP BY source, id
-- without the join and the grouping. A document without kept terms gets a
-- NULL fingerprint and never takes part in the join.
-- term_set keeps all of a document's distinct term hashes, sorted: the set
-- that candidate verification compares. minhash holds its MinHash LSH band
-- keys in a store's runs ({{minhash}}: minhash_keys with the run's bands ×
-- rows), computed here once per document in O(terms) and kept, so no later
-- night hashes a stored term set again. It is NULL in a one-shot run, which
-- computes the keys of its distinct fingerprints only, when it makes
-- term_sets, and without MinHash candidates.
-- shingles is the shingle sketch made with the terms (20_terms.sql), and
-- vector the 64 votes before the sign step, at 8 bits: what SimHash-cosine
-- (--verify cosine:T) compares instead of the term sets, made only when
-- {{with_vector}} (NULL otherwise).
-- Row groups of at most 65,536 rows, and of about 2^23 characters of text
-- ({{row_group_rows}}, stages.rs), let the later stages scan the table on
-- every core, and bound what the writer holds: it keeps a row group whole
-- until it is written, and one group of long articles was encoded and
-- written at the end of the statement on one core while the other waited
-- (Heybox, 18,060 articles in one group of 30 MB: the statement's median
-- 334 ms, 299 ms in three groups). Ids, fingerprints, MinHash keys, sketches
-- and vectors are (nearly) all distinct: a dictionary for them is built only
-- to be given up, so they are written plain (Weibo: the statement 2.44 →
-- 2.15 s, the file 195 → 183 MB; Heybox 44.8 → 43.9 MB). Term sets keep
-- theirs: common terms recur, and without it a Heybox file grew by 9 %. Its
-- page may hold 8 MiB (a million hashes), not Parquet's 1 MiB: past that the
-- writer gives the dictionary up and writes the rest of the row group's
-- hashes plain, which long articles reach (Heybox in one row group, 231,174
-- distinct terms: its term sets 21.8 → 11.8 MB, the file 39.9 → 29.8 MB, the
-- statement about a tenth faster). A store's runs keep 1 MiB
-- (storage/sorted.rs): a night fetches their pages one by one, each with its
-- row group's dictionary.
-- Fingerprints and sketches are hashes: zstd (the session's codec) saved
-- 4 % of their bytes for 12 % of the statement's time on one core (Weibo:
-- user time 0.72 → 0.56 s over a copy of the file, the file 47.4 → 49.9
-- MB), so they are written uncompressed; ids and term sets compress, and
-- keep it. MinHash keys keep it too: a store night's rows repeat.
COPY (
  SELECT source, id, simhash, n_terms, n_chars, term_set, {{minhash}} AS minhash, shingles, vector{{keep_key}}
  FROM (
    SELECT source, id, f['simhash'] AS simhash, COALESCE(f['n_terms'], 0) AS n_terms, n_chars, f['vector'] AS vector,
           term_set(terms) AS term_set, shingles{{keep_key}}
    FROM (SELECT *, idf_simhash(terms, {{model}}, {{model_version}}, {{n_docs}}, {{weighting}}, {{formula}}, {{top_k}}, {{with_vector}}) AS f
          FROM terms)
  )
  ORDER BY source, id
) TO {{path}} STORED AS PARQUET OPTIONS ('format.max_row_group_size' '{{row_group_rows}}', 'format.dictionary_page_size_limit' '8388608',
  'format.dictionary_enabled::id' 'false', 'format.dictionary_enabled::simhash' 'false',
  'format.dictionary_enabled::minhash.list.item' 'false', 'format.dictionary_enabled::shingles.list.item' 'false',
  'format.dictionary_enabled::vector' 'false',
  'format.compression::simhash' 'uncompressed', 'format.compression::shingles.list.item' 'uncompressed')
