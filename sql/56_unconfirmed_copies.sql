-- Stage 4c, with verification only: documents that share their fingerprint
-- with others but fail the term-set check against the group's first
-- document by (source, id). Identical 64-bit fingerprints are strong
-- evidence, not proof: heavy title terms, for one, can give two different
-- articles under one headline the same fingerprint. These documents are
-- left out of the clusters and pairs (they are no one's duplicate).
COPY (
  WITH anchors AS (
    SELECT simhash, first_value(term_set ORDER BY source, id) AS term_set, count(*) AS n
    FROM fingerprints
    WHERE simhash IS NOT NULL
    GROUP BY simhash
  )
  SELECT f.source, f.id
  FROM fingerprints f
  JOIN anchors a ON f.simhash = a.simhash
  WHERE a.n > 1 AND set_similarity(f.term_set, a.term_set, {{measure}}) < {{threshold}}
  ORDER BY f.source, f.id
) TO {{path}} STORED AS PARQUET
