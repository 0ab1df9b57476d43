-- Store runs, with verification: tonight's documents whose fingerprint is
-- shared with an earlier document (by (source, id), stored or tonight's)
-- but whose term set fails the check against that first document's. They
-- are left out of candidates, clusters and pairs (no one's duplicate), as
-- 56_unconfirmed_copies.sql does within one run. Earlier runs are never
-- revisited.
SELECT f.source, f.id
FROM fingerprints f
JOIN term_sets t ON t.simhash = f.simhash
WHERE set_similarity(f.term_set, t.term_set, {{measure}}) < {{threshold}}
ORDER BY f.source, f.id
