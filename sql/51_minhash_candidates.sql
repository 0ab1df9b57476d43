-- Stage 4, MinHash beside (or instead of) SimHash: candidate pairs of
-- distinct fingerprints whose term sets share a MinHash LSH band key (bands
-- × rows bins; a pair with Jaccard similarity s is a candidate with
-- probability 1 − (1 − s^rows)^bands), each fingerprint represented by its
-- term set in `term_sets` (57_term_sets.sql). The keys were computed with
-- the fingerprints (40_fingerprints.sql); each key hashes its band's index,
-- so the join needs the key alone.
-- As in 50_near_pairs.sql, one side is always tonight's, stored pairs are
-- never joined again, and pairs of tonight's fingerprints come once.
-- Every candidate is then checked by 55_verified_pairs.sql.
COPY (
  WITH keyed AS (
    SELECT simhash, tonight, unnest(minhash) AS key FROM term_sets
  )
  SELECT least(a.simhash, b.simhash) AS simhash_a,
         greatest(a.simhash, b.simhash) AS simhash_b,
         hamming(a.simhash, b.simhash) AS hamming,
         CAST(NULL AS DOUBLE) AS similarity
  FROM keyed a
  JOIN keyed b ON a.key = b.key
  WHERE a.tonight
    AND a.simhash <> b.simhash
    AND (NOT b.tonight OR a.simhash < b.simhash)
  GROUP BY least(a.simhash, b.simhash), greatest(a.simhash, b.simhash), hamming(a.simhash, b.simhash)
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET
