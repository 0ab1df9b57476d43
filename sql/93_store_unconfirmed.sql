-- Store runs, with verification: tonight's documents whose fingerprint is
-- shared with an earlier document (by (source, id), stored or tonight's)
-- but whose term set fails the check against that first document's. They
-- are left out of candidates, clusters and pairs (no one's duplicate), as
-- 56_unconfirmed_copies.sql does within one run. Earlier runs are never
-- revisited. With a duplication policy ({{min_shared}}, NULL without one)
-- a copy must also share enough text with that document, as in
-- 55_verified_pairs.sql. A similarity that cannot be measured (a cosine
-- of all-zero votes) fails.
SELECT f.source, f.id
FROM fingerprints f
JOIN term_sets t ON t.simhash = f.simhash
WHERE COALESCE(CASE WHEN {{measure}} = 'cosine' THEN simhash_cosine(f.vector, t.vector)
                     ELSE set_similarity(f.term_set, t.term_set, {{measure}}) END, -1.0) < {{threshold}}
   OR ({{min_shared}} IS NOT NULL
       AND COALESCE(greatest(containment(f.shingles, t.shingles), containment(t.shingles, f.shingles)), -1.0) < {{min_shared}})
ORDER BY f.source, f.id
