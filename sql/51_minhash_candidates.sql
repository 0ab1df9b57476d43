-- Stage 4, MinHash beside (or instead of) SimHash: candidate pairs of
-- distinct fingerprints whose term sets share a MinHash LSH band (bands ×
-- rows MinHash functions; a pair with Jaccard similarity s is a candidate
-- with probability 1 − (1 − s^rows)^bands). Each distinct fingerprint is
-- represented by the term set of its first eligible document by
-- (source, id) (see 56_unconfirmed_copies.sql).
-- Every candidate is then checked by 55_verified_pairs.sql.
COPY (
  WITH sets AS (
    SELECT simhash, first_value(term_set ORDER BY source, id) AS term_set
    FROM eligible
    WHERE simhash IS NOT NULL
    GROUP BY simhash
  ),
  keyed AS (
    SELECT simhash, b['band'] AS band, b['key'] AS key
    FROM (SELECT simhash, unnest(minhash_keys(term_set, {{bands}}, {{rows}})) AS b FROM sets)
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
