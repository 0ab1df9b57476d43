-- Stage 2: corpus-wide document frequencies. term_stats lists each distinct
-- term of a document once, so df(term) is the number of rows that carry it.
-- Saved as an IDF model (hash, term, df), this table keeps fingerprints of
-- different runs comparable.
COPY (
  SELECT t['hash'] AS hash,
         min(t['term']) AS term,
         count(*) AS df
  FROM (SELECT unnest(terms) AS t FROM terms)
  GROUP BY t['hash']
  ORDER BY hash
) TO {{path}} STORED AS PARQUET
