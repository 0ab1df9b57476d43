-- Stage 4, when the run's work stays in memory or a memory limit has room
-- for it: the pairs of 50_near_pairs.sql (every pair within k of tonight's
-- distinct fingerprints and the stored ones tonight touches, once, never
-- two stored ones), found by banded_pairs over all of them at once: it sorts the fingerprints (one
-- is tonight's when any of its rows is), then each band's keys with them
-- (src/join.rs), where the join builds and probes a hash table of every
-- band row (Weibo: 4.24 million a side). It holds every fingerprint in
-- memory: under a memory limit the run first sets aside what the sort
-- needs (src/job/candidates.rs) and bounds the pairs to what that holds,
-- and joins instead (50_near_pairs.sql: the same pairs, in the same
-- columns) when either does not fit; a cluster always joins.
COPY (
  SELECT p['a'] AS simhash_a,
         p['b'] AS simhash_b,
         p['hamming'] AS hamming,
         CAST(NULL AS DOUBLE) AS similarity
  FROM (
    SELECT unnest(banded_pairs(array_agg(simhash), array_agg(tonight), {{k}}, {{m}}, {{max_pairs}})) AS p
    FROM (
      SELECT simhash, true AS tonight FROM fingerprints WHERE simhash IS NOT NULL
      UNION ALL
      SELECT simhash, false AS tonight FROM stored WHERE simhash IS NOT NULL
    )
  )
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
