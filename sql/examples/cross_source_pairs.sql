-- Documents of one source that have a near duplicate in another source,
-- counted per pair of sources (clusters span sources, pairs are edges).
--   neardup sql --table clusters=OUT/clusters -f sql/examples/cross_source_pairs.sql
SELECT a.source AS source_a, b.source AS source_b, count(*) AS document_pairs
FROM clusters a
JOIN clusters b ON a.cluster_id = b.cluster_id AND a.source < b.source
WHERE hamming(a.simhash, b.simhash) <= 3
GROUP BY a.source, b.source
ORDER BY document_pairs DESC;
