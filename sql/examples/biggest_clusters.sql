-- The largest duplicate clusters and their representatives.
--   neardup sql --table clusters=OUT/clusters -f sql/examples/biggest_clusters.sql
SELECT cluster_id, cluster_size, source, id AS representative
FROM clusters
WHERE is_representative
ORDER BY cluster_size DESC, cluster_id
LIMIT 20;
