-- Stage 4b: candidate pairs checked on their term sets (`term_sets`,
-- 57_term_sets.sql); a pair is kept when set_similarity (Jaccard, or the
-- overlap coefficient) reaches the threshold, or, with the measure
-- 'cosine', the cosine of their SimHash vectors (SimHash-cosine; the
-- planner folds the CASE on the constant measure away). Each kept pair carries how
-- much of each side's text the other holds: shared_a is the share of
-- simhash_a's document's shingles found in simhash_b's, shared_b the
-- reverse (containment of the shingle sketches). With a duplication policy
-- ({{min_shared}}, NULL without one) a pair is kept only when the shorter
-- document's share, the larger of the two, reaches it; a share that cannot
-- be measured does not.
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
  kept AS (
    SELECT simhash_a, simhash_b, hamming, similarity,
           containment(shingles_a, shingles_b) AS shared_a,
           containment(shingles_b, shingles_a) AS shared_b
    FROM scored
    WHERE similarity >= {{threshold}}
  )
  SELECT simhash_a, simhash_b, hamming, similarity, shared_a, shared_b
  FROM kept
  WHERE {{min_shared}} IS NULL OR COALESCE(greatest(shared_a, shared_b), -1.0) >= {{min_shared}}
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
