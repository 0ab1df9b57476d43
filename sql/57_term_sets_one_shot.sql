-- The table `term_sets` of a one-shot run with a check: the same rows as
-- 57_term_sets.sql gives a run with nothing stored, found without an
-- aggregate. A fingerprint of one document stands for that document. A
-- shared one stands for its first copy by (source, id) that passed the check
-- of its copies: the runner's split of 56_unconfirmed_copies.sql's groups
-- lists it (`first_copies`, simhash, source, id; one row per shared
-- fingerprint). A copy the check left out is never a first, and a lone
-- document is never checked, so the view `eligible` is not read.
-- The join is on the fingerprint alone, with the shared fingerprints (few)
-- on its build side; only their copies compare (source, id). The aggregate
-- of 57_term_sets.sql built a string key per row and grouped them, then
-- joined back on it (Weibo: 0.64 s for the statement).
-- The band keys `{{minhash}}` are computed again from the term set, not
-- read: decoding the 32 keys of each fingerprint from the file took longer
-- (Weibo: the statement 484-602 ms reading them, 402-482 ms computing).
-- A work table, as the one of 57_term_sets.sql.
COPY (
  SELECT t.simhash, t.term_set, {{minhash}} AS minhash, t.shingles, t.vector, true AS tonight
  FROM fingerprints t
  LEFT JOIN first_copies f ON f.simhash = t.simhash
  WHERE t.simhash IS NOT NULL
    AND (f.simhash IS NULL OR (f.source = t.source AND f.id = t.id))
) TO {{path}} STORED AS PARQUET OPTIONS ('format.max_row_group_size' '65536', 'format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
