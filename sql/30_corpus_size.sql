-- N: documents with at least one kept term, over all inputs together.
-- (`term_count` is the number of terms, written by 20_terms.sql.)
SELECT count(*) AS n_docs FROM terms WHERE term_count > 0
