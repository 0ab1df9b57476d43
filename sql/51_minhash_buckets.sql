-- Stage 4, MinHash beside (or instead of) SimHash, part one: the MinHash
-- buckets that can give a pair, with their members. A bucket is the
-- fingerprints whose term sets (`term_sets`, 57_term_sets.sql) share one
-- LSH band key (bands × rows bins; a pair with Jaccard similarity s shares
-- a key with probability 1 − (1 − s^rows)^bands). The keys were computed
-- with the fingerprints (40_fingerprints.sql), and each hashes its band's
-- index, so a bucket is a key alone. A bucket gives pairs when it has two
-- members and one of them is tonight's: of the 13.6 million keys of
-- `weibo_reposts`, 0.3 million do (`shared_minhash_keys`: 51_shared_keys_by_sort.sql
-- when the run's work stays in memory, 51_shared_keys_by_group.sql under a
-- memory limit or on a cluster), and 52_minhash_candidates.sql reads only
-- their members, written here once.
COPY (
  -- The few shared keys on the build side of the join.
  SELECT k.key, k.simhash, k.tonight, s.members
  FROM shared_minhash_keys s
  JOIN (SELECT simhash, tonight, unnest(minhash) AS key FROM term_sets) k ON k.key = s.key
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
