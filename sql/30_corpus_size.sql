-- N: documents with at least one kept term, over all inputs together.
SELECT count(*) AS n_docs FROM terms WHERE cardinality(terms) > 0
