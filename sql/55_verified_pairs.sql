-- Stage 4b: candidate pairs checked on their term sets (`term_sets`,
-- 57_term_sets.sql); a pair is kept when set_similarity (Jaccard, or the
-- overlap coefficient) reaches the threshold.
COPY (
  WITH scored AS (
    SELECT c.simhash_a, c.simhash_b, c.hamming,
           set_similarity(x.term_set, y.term_set, {{measure}}) AS similarity
    FROM (SELECT DISTINCT simhash_a, simhash_b, hamming FROM candidates) c
    JOIN term_sets x ON x.simhash = c.simhash_a
    JOIN term_sets y ON y.simhash = c.simhash_b
  )
  SELECT simhash_a, simhash_b, hamming, similarity
  FROM scored
  WHERE similarity >= {{threshold}}
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
