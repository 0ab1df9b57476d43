-- N: documents with at least one kept term, over all inputs together.
-- (`term_count` is the terms' cardinality, written by 20_terms.sql.)
SELECT count(*) AS n_docs FROM terms WHERE term_count > 0
