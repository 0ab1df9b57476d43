-- Stage 4: the banded join of tonight's distinct fingerprints against every
-- known one: tonight's and, in a store run, the earlier runs' fingerprints
-- that tonight touches (`stored`, empty in a one-shot run). Identical
-- fingerprints are one row here; their documents are grouped in the cluster
-- step.
-- Each fingerprint has one key per band; fingerprints within distance k
-- share at least one (band, key), so the equi-join misses no pair. Every
-- pair found has a fingerprint of tonight: two stored fingerprints are never
-- joined again. Candidates are checked with the exact distance, and a pair
-- is kept once: from the first band it shares and, when both are tonight's,
-- with the smaller on the left. These are the candidate pairs; when
-- verification is on, 55_verified_pairs.sql checks them on their term sets.
-- The join is on one column, `bucket` (band and key mixed into one value):
-- under a memory limit the engine sorts both sides by the join key, and a
-- sort on one UInt64 is far cheaper than on (band, key). The first band
-- the pair shares being both sides' band says that they are in one band
-- and share its key, so two (band, key) that happen to share a bucket give
-- nothing, and the pairs are exactly those of an equi-join on (band, key).
COPY (
  WITH known AS (
    SELECT simhash, bool_or(tonight) AS tonight
    FROM (
      SELECT simhash, true AS tonight FROM fingerprints WHERE simhash IS NOT NULL
      UNION ALL
      SELECT simhash, false AS tonight FROM stored WHERE simhash IS NOT NULL
    )
    GROUP BY simhash
  ),
  keyed AS (
    SELECT simhash, tonight, b['band'] AS band, b['bucket'] AS bucket
    FROM (SELECT simhash, tonight, unnest(band_keys(simhash, {{k}}, {{m}})) AS b FROM known)
  )
  SELECT least(a.simhash, b.simhash) AS simhash_a,
         greatest(a.simhash, b.simhash) AS simhash_b,
         hamming(a.simhash, b.simhash) AS hamming,
         CAST(NULL AS DOUBLE) AS similarity
  FROM keyed a
  JOIN keyed b ON a.bucket = b.bucket
  WHERE a.tonight
    AND a.simhash <> b.simhash
    AND (NOT b.tonight OR a.simhash < b.simhash)
    AND hamming(a.simhash, b.simhash) <= {{k}}
    AND first_common_band(a.simhash, b.simhash, {{k}}, {{m}}) = a.band
    AND first_common_band(a.simhash, b.simhash, {{k}}, {{m}}) = b.band
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
