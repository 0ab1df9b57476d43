-- Store runs, stage 4: the banded join of tonight's fingerprints against
-- every known fingerprint (tonight's and the store's earlier runs'), so no
-- pair of stored fingerprints is joined again: every pair found has at least
-- one fingerprint of tonight. Otherwise as 50_near_pairs.sql: each pair once,
-- smaller fingerprint first, kept from the first band it shares.
COPY (
  WITH night AS (
    SELECT DISTINCT simhash FROM fingerprints WHERE simhash IS NOT NULL
  ),
  known AS (
    SELECT simhash FROM night
    UNION
    SELECT simhash FROM stored WHERE simhash IS NOT NULL
  ),
  keyed_night AS (
    SELECT simhash, b['band'] AS band, b['key'] AS key
    FROM (SELECT simhash, unnest(band_keys(simhash, {{k}}, {{m}})) AS b FROM night)
  ),
  keyed_known AS (
    SELECT simhash, b['band'] AS band, b['key'] AS key
    FROM (SELECT simhash, unnest(band_keys(simhash, {{k}}, {{m}})) AS b FROM known)
  )
  SELECT DISTINCT
         least(a.simhash, b.simhash) AS simhash_a,
         greatest(a.simhash, b.simhash) AS simhash_b,
         hamming(a.simhash, b.simhash) AS hamming,
         CAST(NULL AS DOUBLE) AS similarity
  FROM keyed_night a
  JOIN keyed_known b ON a.band = b.band AND a.key = b.key
  WHERE a.simhash <> b.simhash
    AND hamming(a.simhash, b.simhash) <= {{k}}
    AND first_common_band(a.simhash, b.simhash, {{k}}, {{m}}) = a.band
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET
