-- Store runs: the term set that stands for each known fingerprint (that of
-- its first document by (source, id) among the store's earlier runs and
-- tonight's documents), for MinHash candidates, the term-set check, and the
-- check of tonight's copies of a known fingerprint (93_store_unconfirmed.sql).
COPY (
  SELECT simhash, term_set, minhash
  FROM (
    SELECT simhash, term_set, minhash, row_number() OVER (PARTITION BY simhash ORDER BY source, id) AS r
    FROM (
      SELECT simhash, source, id, term_set, minhash FROM fingerprints WHERE simhash IS NOT NULL
      UNION ALL
      SELECT simhash, source, id, term_set, minhash FROM stored WHERE simhash IS NOT NULL
    )
  )
  WHERE r = 1
) TO {{path}} STORED AS PARQUET OPTIONS ('format.max_row_group_size' '65536')
