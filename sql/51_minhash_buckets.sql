-- Stage 4, MinHash beside (or instead of) SimHash, part one: the MinHash
-- buckets that can give a pair, with their members. A bucket is the
-- fingerprints whose term sets (`term_sets`, 57_term_sets.sql) share one
-- LSH band key (bands × rows bins; a pair with Jaccard similarity s shares
-- a key with probability 1 − (1 − s^rows)^bands). The keys were computed
-- with the fingerprints (40_fingerprints.sql), and each hashes its band's
-- index, so a bucket is a key alone. A bucket gives pairs when it has two
-- members and one of them is tonight's: of the 13.6 million keys of
-- `weibo_reposts`, 0.3 million do, and 52_minhash_candidates.sql reads
-- only their members, written here once.
-- When the run's work stays in memory ({{in_memory}}), shared_keys finds
-- them by a radix sort of the keys (8 bytes each): a GROUP BY kept a hash
-- table of 12.8 million groups with a count and a flag each (Weibo: peak
-- memory 1.41–1.67 GB against 1.27–1.31, the statement 1.23–1.41 s against
-- 1.02–1.17). Under a memory limit, or on a cluster, the GROUP BY, which
-- spills and spreads over executors, does it; the planner drops the other
-- branch.
COPY (
  WITH keyed AS (
    SELECT simhash, tonight, unnest(minhash) AS key FROM term_sets
  ),
  shared AS (
    SELECT b['key'] AS key, CAST(b['members'] AS BIGINT) AS members
    FROM (SELECT unnest(shared_keys(minhash, tonight)) AS b FROM term_sets WHERE {{in_memory}})
    UNION ALL
    SELECT key, count(*) AS members
    FROM keyed
    WHERE NOT {{in_memory}}
    GROUP BY key
    HAVING count(*) > 1 AND bool_or(tonight)
  )
  -- The few shared keys on the build side of the join.
  SELECT k.key, k.simhash, k.tonight, s.members
  FROM shared s
  JOIN keyed k ON k.key = s.key
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
