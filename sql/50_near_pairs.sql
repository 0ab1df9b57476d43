-- Stage 4: the banded self-join over distinct fingerprints (identical ones
-- are one row here; their documents are grouped in the cluster step).
-- Each fingerprint has one key per band; fingerprints within distance k share
-- at least one (band, key), so the equi-join misses no pair. Candidates are
-- checked with the exact distance, and a pair is kept only from the first
-- band it shares, so it appears once. These are the candidate pairs; when
-- verification is on, 55_verified_pairs.sql checks them on their term sets.
COPY (
  WITH fps AS (
    SELECT DISTINCT simhash FROM fingerprints WHERE simhash IS NOT NULL
  ),
  keyed AS (
    SELECT simhash, b['band'] AS band, b['key'] AS key
    FROM (SELECT simhash, unnest(band_keys(simhash, {{k}}, {{m}})) AS b FROM fps)
  )
  SELECT a.simhash AS simhash_a,
         b.simhash AS simhash_b,
         hamming(a.simhash, b.simhash) AS hamming,
         CAST(NULL AS DOUBLE) AS similarity
  FROM keyed a
  JOIN keyed b ON a.band = b.band AND a.key = b.key
  WHERE a.simhash < b.simhash
    AND hamming(a.simhash, b.simhash) <= {{k}}
    AND first_common_band(a.simhash, b.simhash, {{k}}, {{m}}) = a.band
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET
