-- Stage 3: weights and SimHash. Every term votes its weight for the bits set
-- in its hash; simhash_agg sums the votes in fixed point, so the fingerprint
-- does not depend on partitioning. A document without kept terms gets a NULL
-- fingerprint and never takes part in the join.
-- term_weight computes, for weighting 'improved' (the default),
--   tf · idf(df, N) · (1 + cx + len + logo + title)
-- and tf · idf, the raw count, or 1 for 'tfidf', 'tf' and 'none'.
COPY (
  WITH weighted AS (
    SELECT e.source,
           e.id,
           t['hash'] AS hash,
           t['count'] AS count,
           {{weight}} AS weight
    FROM (SELECT source, id, unnest(terms) AS t FROM terms) e
    {{df_join}}
  ),
  hashed AS (
    SELECT source, id, simhash_agg(hash, weight) AS simhash, CAST(sum(count) AS BIGINT) AS n_terms
    FROM weighted
    GROUP BY source, id
  )
  SELECT d.source, d.id, h.simhash, COALESCE(h.n_terms, 0) AS n_terms, d.n_chars{{keep_key}}
  FROM terms d
  LEFT JOIN hashed h ON d.source = h.source AND d.id = h.id
  ORDER BY d.source, d.id
) TO {{path}} STORED AS PARQUET
