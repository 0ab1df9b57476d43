-- Stage 4a, with verification, when the run's work stays in memory: every
-- fingerprinted document with what the check of copies reads, read once
-- into the client (job/copies.rs, term_sets_one_shot). The client finds
-- the shared fingerprints, checks their copies in (source, id) order as it
-- checks the groups of 56_unconfirmed_copies.sql, and makes the table
-- `term_sets` of 57_term_sets_one_shot.sql itself: one read of the
-- fingerprints where the two statements made three, with no sort of rows
-- that carry their lists and no join back to the first copies. From the
-- same read it makes `eligible` (59_in_clusters.sql), with the columns the
-- keep rule orders by. Under a memory limit or on a cluster the two
-- statements run instead, and `eligible` is a view.
SELECT simhash, source, id, term_set, shingles, vector{{keep_columns}}
FROM fingerprints
WHERE simhash IS NOT NULL
