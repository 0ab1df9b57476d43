-- Stage 4, MinHash beside (or instead of) SimHash: candidate pairs of
-- distinct fingerprints whose term sets share a MinHash LSH band (bands ×
-- rows MinHash functions; a pair with Jaccard similarity s is a candidate
-- with probability 1 − (1 − s^rows)^bands), each fingerprint represented
-- by its term set in `term_sets` (57_term_sets.sql).
-- Every candidate is then checked by 55_verified_pairs.sql.
COPY (
  WITH keyed AS (
    SELECT simhash, b['band'] AS band, b['key'] AS key
    FROM (SELECT simhash, unnest(minhash_keys(term_set, {{bands}}, {{rows}})) AS b FROM term_sets)
  )
  SELECT a.simhash AS simhash_a,
         b.simhash AS simhash_b,
         hamming(a.simhash, b.simhash) AS hamming,
         CAST(NULL AS DOUBLE) AS similarity
  FROM keyed a
  JOIN keyed b ON a.band = b.band AND a.key = b.key
  WHERE a.simhash < b.simhash
  GROUP BY a.simhash, b.simhash
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET
