-- Stage 6: the pairs, as evidence edges that stay linear in the corpus size,
-- for one-shot and store runs alike (`stored` is empty in a one-shot run).
-- Each fingerprint is anchored at one document (`anchors`,
-- 69_anchors.sql), in an earlier run if it has one. Each other document
-- in a cluster (`in_clusters`) is paired with its fingerprint's anchor at
-- distance 0 (g − 1 pairs for g copies, not g(g − 1)/2), and each near pair of distinct
-- fingerprints found tonight is reported once, between the two anchors.
-- Every document pair within distance k is implied (see
-- sql/examples/all_document_pairs.sql), and the pairs of all nights together
-- link the same documents as one run over all of them. In every pair
-- (source_a, id_a) < (source_b, id_b). `similarity` is the term-set
-- similarity of a verified near pair (NULL without verification, and for
-- identical fingerprints). `shared_a` is the share of document a's text
-- found in document b (containment of shingle sketches), `shared_b` the
-- reverse: of a near pair as the check measured it (55_verified_pairs.sql),
-- or measured here on the anchors' sketches (without a check, and for
-- identical fingerprints). NULL where a sketch is missing.
COPY (
  WITH exact AS (
    SELECT a.source AS sx, a.id AS ix, f.source AS sy, f.id AS iy,
           CAST(0 AS INT) AS hamming,
           CAST(NULL AS DOUBLE) AS similarity,
           containment(a.shingles, f.shingles) AS shared_x,
           containment(f.shingles, a.shingles) AS shared_y
    FROM in_clusters f
    JOIN anchors a ON f.simhash = a.simhash
    WHERE NOT (f.source = a.source AND f.id = a.id)
  ),
  near AS (
    SELECT x.source AS sx, x.id AS ix, y.source AS sy, y.id AS iy, n.hamming, n.similarity,
           COALESCE(n.shared_a, containment(x.shingles, y.shingles)) AS shared_x,
           COALESCE(n.shared_b, containment(y.shingles, x.shingles)) AS shared_y
    FROM near_pairs n
    JOIN anchors x ON n.simhash_a = x.simhash
    JOIN anchors y ON n.simhash_b = y.simhash
  ),
  edges AS (
    SELECT *, (sy < sx OR (sy = sx AND iy < ix)) AS swap
    FROM (SELECT * FROM exact UNION ALL SELECT * FROM near)
  )
  SELECT CASE WHEN swap THEN sy ELSE sx END AS source_a,
         CASE WHEN swap THEN iy ELSE ix END AS id_a,
         CASE WHEN swap THEN sx ELSE sy END AS source_b,
         CASE WHEN swap THEN ix ELSE iy END AS id_b,
         hamming,
         similarity,
         CASE WHEN swap THEN shared_y ELSE shared_x END AS shared_a,
         CASE WHEN swap THEN shared_x ELSE shared_y END AS shared_b
  FROM edges
  -- One key a row: the same order, one byte string compared (src/udf/sort_key.rs).
  ORDER BY sort_key(source_a, id_a, source_b, id_b)
) TO {{path}} STORED AS PARQUET
