-- Stage 5: clusters, over `in_clusters` (59_in_clusters.sql: the eligible
-- documents a cluster holds, with their cluster). Every cluster of two or
-- more documents is listed; its representative is the first document by
-- the keep rule:
--   ORDER BY {{keep_order}}
COPY (
  WITH ranked AS (
    SELECT source, id, simhash, cluster_id,
           count(*) OVER (PARTITION BY cluster_id) AS cluster_size,
           row_number() OVER (PARTITION BY cluster_id ORDER BY {{keep_order}}) AS rank
    FROM in_clusters
  )
  SELECT source, id, cluster_id, rank = 1 AS is_representative, cluster_size, simhash
  FROM ranked
  ORDER BY cluster_id, source, id
) TO {{path}} STORED AS PARQUET
