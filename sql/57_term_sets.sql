-- The term set that stands for each distinct fingerprint in MinHash
-- candidates and in the term-set check: that of its first document by
-- (source, id) among tonight's rows `{{tonight}}` and the first stored rows
-- of the fingerprints tonight touches (`stored_term_sets`, one row per
-- fingerprint; empty in a one-shot run).
-- `tonight` says whether the fingerprint is one of tonight's.
-- A store run reads all of tonight's `fingerprints`, because its copies are
-- checked against this very table (93_store_unconfirmed.sql). Over a view of
-- tonight's rows less some copies (`eligible`) it gives what a one-shot run
-- with a check gets from 57_term_sets_one_shot.sql, which knows each shared
-- fingerprint's first kept copy from the check and needs no aggregate.
-- Only tonight's fingerprints are ranked: a stored fingerprint that tonight
-- does not have keeps its one row (on the tenth of ten Weibo nights, 137,000
-- of the 143,000 stored rows), and ranking it with the rest held every one.
-- Each fingerprint's first document is found by an aggregate (the least
-- `source || chr(0) || id`, which orders as (source, id) does) over the
-- narrow rows of {{tonight}}, and joined back to the rows with their lists:
-- a ranking window sorted every row with its term set and keys. Those rows
-- are read from `fingerprints`, not {{tonight}}: a first document is one of
-- {{tonight}}'s anyway, and the view `eligible` is an anti join that held
-- every row's lists in its hash table (Weibo: 0.21 s of the statement).
-- Its shingle sketch (`shingles`) goes with it, for the shares of shared
-- text (55_verified_pairs.sql), and its SimHash vector (`vector`) for a
-- SimHash-cosine check. The join back has the firsts (narrow) on
-- its build side and streams the copies with their lists: the other way
-- round it hashed every copy's term set, keys and sketch (Weibo 1.18 s
-- against 0.99 s).
-- Made once, a work table (in the work folder, under a memory limit, in
-- row groups of 65,536 rows): the
-- MinHash candidates and both sides of the check read it, on every core.
-- It is not sorted: every reader joins or groups it, and sorting Weibo's
-- 424,296 rows with their lists cost the statement 0.13 s of 1.18.
COPY (
  WITH tonights AS (
    SELECT DISTINCT simhash FROM {{tonight}} WHERE simhash IS NOT NULL
  ),
  copies AS (
    SELECT simhash, source || chr(0) || id AS doc FROM {{tonight}} WHERE simhash IS NOT NULL
    UNION ALL
    SELECT s.simhash, s.source || chr(0) || s.id
    FROM stored_term_sets s
    JOIN tonights t ON t.simhash = s.simhash
  ),
  firsts AS (
    SELECT simhash, min(doc) AS doc FROM copies GROUP BY simhash
  ),
  rows_with_lists AS (
    SELECT simhash, source || chr(0) || id AS doc, term_set, minhash, shingles, vector FROM fingerprints WHERE simhash IS NOT NULL
    UNION ALL
    SELECT s.simhash, s.source || chr(0) || s.id, s.term_set, s.minhash, s.shingles, s.vector
    FROM stored_term_sets s
    JOIN tonights t ON t.simhash = s.simhash
  )
  SELECT c.simhash, c.term_set, c.minhash, c.shingles, c.vector, true AS tonight
  FROM firsts f JOIN rows_with_lists c ON f.simhash = c.simhash AND f.doc = c.doc
  UNION ALL
  SELECT s.simhash, s.term_set, s.minhash, s.shingles, s.vector, false AS tonight
  FROM stored_term_sets s
  WHERE s.simhash IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM tonights t WHERE t.simhash = s.simhash)
) TO {{path}} STORED AS PARQUET OPTIONS ('format.max_row_group_size' '65536', 'format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
