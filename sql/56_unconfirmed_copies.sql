-- Stage 4a, with verification only: the documents that share their
-- fingerprint with others, with their term sets, in (source, id) order.
-- Identical 64-bit fingerprints are strong evidence, not proof: heavy title
-- terms, for one, can give two different articles under one headline the
-- same fingerprint. The runner splits each group by the term-set check
-- (sets::split_group): its largest consistent subgroup keeps the
-- fingerprint, and the other members are left out of candidates, clusters
-- and pairs (they are no one's duplicate). With a duplication policy
-- (--min-shared) the check also asks for the shared text, on `shingles`;
-- SimHash-cosine (--verify cosine:T) compares `vector`.
SELECT simhash, source, id, term_set, shingles, vector
FROM fingerprints
WHERE simhash IN (
  SELECT simhash FROM fingerprints WHERE simhash IS NOT NULL GROUP BY simhash HAVING count(*) > 1
)
ORDER BY simhash, source, id
