-- The term set that stands for each distinct fingerprint in MinHash
-- candidates and in the term-set check: that of its first eligible document
-- by (source, id) (see 56_unconfirmed_copies.sql). Written once to the work
-- folder, in row groups of 65,536 rows: the MinHash candidates and both
-- sides of the check read it, on every core.
COPY (
  SELECT simhash, term_set, minhash
  FROM (
    SELECT simhash, term_set, minhash, row_number() OVER (PARTITION BY simhash ORDER BY source, id) AS r
    FROM eligible
    WHERE simhash IS NOT NULL
  )
  WHERE r = 1
) TO {{path}} STORED AS PARQUET OPTIONS ('format.max_row_group_size' '65536')
