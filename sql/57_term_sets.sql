-- The term set that stands for each distinct fingerprint in MinHash
-- candidates and in the term-set check: that of its first eligible document
-- by (source, id) (see 56_unconfirmed_copies.sql).
CREATE VIEW term_sets AS
SELECT simhash, first_value(term_set ORDER BY source, id) AS term_set
FROM eligible
WHERE simhash IS NOT NULL
GROUP BY simhash
