-- Stage 6: the pairs, as evidence edges that stay linear in the corpus size.
-- Each group of identical fingerprints is anchored at its smallest
-- (source, id): every other member is paired with the anchor at distance 0
-- (g − 1 pairs for g copies, not g(g − 1)/2). Each near pair of distinct
-- fingerprints is reported once, between the two anchors. Every document
-- pair within distance k is implied: see sql/examples/all_document_pairs.sql.
-- In every pair (source_a, id_a) < (source_b, id_b). `similarity` is the
-- term-set similarity of a verified near pair (NULL without verification,
-- and for identical fingerprints).
COPY (
  WITH anchors AS (
    SELECT simhash, source, id
    FROM (
      SELECT simhash, source, id,
             row_number() OVER (PARTITION BY simhash ORDER BY source, id) AS r
      FROM eligible
      WHERE simhash IN (SELECT DISTINCT simhash FROM clusters)
    )
    WHERE r = 1
  ),
  exact AS (
    SELECT a.source AS source_a, a.id AS id_a, f.source AS source_b, f.id AS id_b,
           CAST(0 AS INT) AS hamming,
           CAST(NULL AS DOUBLE) AS similarity
    FROM eligible f
    JOIN anchors a ON f.simhash = a.simhash
    WHERE NOT (f.source = a.source AND f.id = a.id)
  ),
  near AS (
    SELECT x.source AS sx, x.id AS ix, y.source AS sy, y.id AS iy, n.hamming, n.similarity,
           (y.source < x.source OR (y.source = x.source AND y.id < x.id)) AS swap
    FROM near_pairs n
    JOIN anchors x ON n.simhash_a = x.simhash
    JOIN anchors y ON n.simhash_b = y.simhash
  )
  SELECT source_a, id_a, source_b, id_b, hamming, similarity FROM exact
  UNION ALL
  SELECT CASE WHEN swap THEN sy ELSE sx END,
         CASE WHEN swap THEN iy ELSE ix END,
         CASE WHEN swap THEN sx ELSE sy END,
         CASE WHEN swap THEN ix ELSE iy END,
         hamming,
         similarity
  FROM near
  ORDER BY source_a, id_a, source_b, id_b
) TO {{path}} STORED AS PARQUET
