-- Stage 4b: candidate pairs checked on their term sets. Each distinct
-- fingerprint is represented by the term set of its first eligible
-- document by (source, id); a pair is kept when set_similarity (Jaccard, or the
-- overlap coefficient) reaches the threshold.
COPY (
  WITH sets AS (
    SELECT simhash, first_value(term_set ORDER BY source, id) AS term_set
    FROM eligible
    WHERE simhash IS NOT NULL
    GROUP BY simhash
  ),
  scored AS (
    SELECT c.simhash_a, c.simhash_b, c.hamming,
           set_similarity(x.term_set, y.term_set, {{measure}}) AS similarity
    FROM (SELECT DISTINCT simhash_a, simhash_b, hamming FROM candidates) c
    JOIN sets x ON x.simhash = c.simhash_a
    JOIN sets y ON y.simhash = c.simhash_b
  )
  SELECT simhash_a, simhash_b, hamming, similarity
  FROM scored
  WHERE similarity >= {{threshold}}
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET
