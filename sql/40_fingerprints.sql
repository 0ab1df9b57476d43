-- Stage 3: weights and SimHash. Every term votes its weight for the bits set
-- in its hash; simhash_agg sums the votes in fixed point, so the fingerprint
-- does not depend on partitioning. A document without kept terms gets a NULL
-- fingerprint and never takes part in the join.
-- term_weight computes, for weighting 'improved' (the default),
--   tf · idf(df, N) · (1 + cx + len + logo + title)
-- and tf · idf, the raw count, or 1 for 'tfidf', 'tf' and 'none'.
-- With a top-K setting only each document's K heaviest terms vote
-- ({{voting}} is `weighted`, or those terms ranked by weight, ties by hash).
-- term_set keeps all of a document's distinct term hashes, sorted: the set
-- that candidate verification and MinHash compare.
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
    FROM {{voting}}
    GROUP BY source, id
  )
  SELECT d.source, d.id, h.simhash, COALESCE(h.n_terms, 0) AS n_terms, d.n_chars,
         term_set(d.terms) AS term_set{{keep_key}}
  FROM terms d
  LEFT JOIN hashed h ON d.source = h.source AND d.id = h.id
  ORDER BY d.source, d.id
) TO {{path}} STORED AS PARQUET
