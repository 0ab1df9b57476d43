-- Every document pair within distance k, expanded from the linear pairs
-- table: documents are within k exactly when their fingerprints are. Beware:
-- a fingerprint shared by g documents expands to g(g-1)/2 pairs.
--   neardup sql --table fingerprints=OUT/fingerprints --table clusters=OUT/clusters \
--     -f sql/examples/all_document_pairs.sql
SELECT a.source AS source_a, a.id AS id_a, b.source AS source_b, b.id AS id_b,
       hamming(a.simhash, b.simhash) AS hamming
FROM clusters a
JOIN clusters b
  ON a.cluster_id = b.cluster_id
 AND (a.source < b.source OR (a.source = b.source AND a.id < b.id))
WHERE hamming(a.simhash, b.simhash) <= 3
ORDER BY source_a, id_a, source_b, id_b;
