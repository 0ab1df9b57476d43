-- The term set that stands for each distinct fingerprint in MinHash
-- candidates and in the term-set check: that of its first document by
-- (source, id) among tonight's rows `{{tonight}}` and the stored rows of the
-- fingerprints tonight touches (`stored`, empty in a one-shot run).
-- `tonight` says whether the fingerprint is one of tonight's.
-- A one-shot run reads `eligible` (its copies that fail the check of their
-- shared fingerprint are already left out, 56_unconfirmed_copies.sql); a
-- store run reads all of tonight's `fingerprints`, because its copies are
-- checked against this very table (93_store_unconfirmed.sql).
-- Written once to the work folder, in row groups of 65,536 rows: the
-- MinHash candidates and both sides of the check read it, on every core.
COPY (
  SELECT c.simhash, c.term_set, c.minhash, t.simhash IS NOT NULL AS tonight
  FROM (
    SELECT simhash, term_set, minhash,
           row_number() OVER (PARTITION BY simhash ORDER BY source, id) AS r
    FROM (
      SELECT simhash, source, id, term_set, minhash FROM {{tonight}} WHERE simhash IS NOT NULL
      UNION ALL
      SELECT simhash, source, id, term_set, minhash FROM stored WHERE simhash IS NOT NULL
    )
  ) c
  -- Whether tonight has the fingerprint, by a join on the few chosen rows:
  -- a window over each fingerprint's rows held them all in memory.
  LEFT JOIN (SELECT DISTINCT simhash FROM {{tonight}} WHERE simhash IS NOT NULL) t ON t.simhash = c.simhash
  WHERE c.r = 1
) TO {{path}} STORED AS PARQUET OPTIONS ('format.max_row_group_size' '65536')
