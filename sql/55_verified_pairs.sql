-- Stage 4b: candidate pairs checked on their term sets (`term_sets`,
-- 57_term_sets.sql); a pair is kept when set_similarity (Jaccard, or the
-- overlap coefficient) reaches the threshold, or, with the measure
-- 'cosine', the cosine of their SimHash vectors (SimHash-cosine; the
-- planner folds the CASE on the constant measure away). Each kept pair carries how
-- much of each side's text the other holds: shared_a is the share of
-- simhash_a's document's shingles found in simhash_b's, shared_b the
-- reverse (containment of the shingle sketches). These are the checked
-- pairs; the duplication policy (58_kept_pairs.sql) keeps those that share
-- enough text, and the summary counts both.
COPY (
  WITH scored AS (
    SELECT c.simhash_a, c.simhash_b, c.hamming,
           CASE WHEN {{measure}} = 'cosine' THEN simhash_cosine(x.vector, y.vector)
                ELSE set_similarity(x.term_set, y.term_set, {{measure}}) END AS similarity,
           x.shingles AS shingles_a, y.shingles AS shingles_b
    FROM (SELECT DISTINCT simhash_a, simhash_b, hamming FROM candidates) c
    JOIN term_sets x ON x.simhash = c.simhash_a
    JOIN term_sets y ON y.simhash = c.simhash_b
  ),
  checked AS (
    SELECT simhash_a, simhash_b, hamming, similarity, shingles_a, shingles_b
    FROM scored
    WHERE similarity >= {{threshold}}
  )
  SELECT simhash_a, simhash_b, hamming, similarity,
         containment(shingles_a, shingles_b) AS shared_a,
         containment(shingles_b, shingles_a) AS shared_b
  FROM checked
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
