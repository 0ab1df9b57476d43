-- Stage 4, MinHash part one (see 51_minhash_buckets.sql), when the run's
-- work stays in memory: what 51_shared_keys_by_group.sql finds, by
-- shared_keys: a radix sort of each partition's keys (8 bytes each, tagged
-- with their row's `tonight`), the sorted runs then merged. The GROUP BY kept a hash table of 12.8 million groups
-- with a count and a flag each (Weibo: peak memory 1.41–1.57 GB against
-- 1.27–1.31, the statements 1.23–1.41 s against 1.02–1.17).
COPY (
  SELECT b['key'] AS key, CAST(b['members'] AS BIGINT) AS members
  FROM (SELECT unnest(shared_keys(minhash, tonight)) AS b FROM term_sets)
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
