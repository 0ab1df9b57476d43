-- Stage 4, MinHash part one (see 51_minhash_buckets.sql), under a memory
-- limit or on a cluster: the band keys of `term_sets` held by two rows or
-- more, one of them tonight's, with how many hold each. A GROUP BY, which
-- spills to disk and spreads over executors.
COPY (
  SELECT key, count(*) AS members
  FROM (SELECT tonight, unnest(minhash) AS key FROM term_sets)
  GROUP BY key
  HAVING count(*) > 1 AND bool_or(tonight)
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
