-- The duplication policy over the checked pairs (`checked_pairs`,
-- 55_verified_pairs.sql): with a policy ({{min_shared}}, NULL without one)
-- a pair is kept only when the shorter document's share of shared text,
-- the larger of the two shares, reaches it; a share that cannot be
-- measured does not. Registered as the view `near_pairs`, the edges of the
-- clusters.
SELECT simhash_a, simhash_b, hamming, similarity, shared_a, shared_b
FROM checked_pairs
WHERE {{min_shared}} IS NULL OR COALESCE(greatest(shared_a, shared_b), -1.0) >= {{min_shared}}
