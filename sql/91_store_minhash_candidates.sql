-- Store runs, stage 4 with MinHash: term sets of tonight's fingerprints
-- sharing a MinHash LSH band key with any known fingerprint's term set
-- (`term_sets`, 92_store_term_sets.sql). As 51_minhash_candidates.sql, but
-- one side is always tonight's.
COPY (
  WITH keyed AS (
    SELECT simhash, unnest(minhash) AS key FROM term_sets
  ),
  keyed_night AS (
    SELECT * FROM keyed
    WHERE simhash IN (SELECT DISTINCT simhash FROM fingerprints WHERE simhash IS NOT NULL)
  )
  SELECT least(a.simhash, b.simhash) AS simhash_a,
         greatest(a.simhash, b.simhash) AS simhash_b,
         hamming(a.simhash, b.simhash) AS hamming,
         CAST(NULL AS DOUBLE) AS similarity
  FROM keyed_night a
  JOIN keyed b ON a.key = b.key
  WHERE a.simhash <> b.simhash
  GROUP BY least(a.simhash, b.simhash), greatest(a.simhash, b.simhash), hamming(a.simhash, b.simhash)
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET
