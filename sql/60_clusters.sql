-- Stage 5: clusters, over `eligible` (the fingerprints, less the copies
-- that failed verification, see 56_unconfirmed_copies.sql). `components`
-- maps every fingerprint that has a near pair to its component (labelled by the component's smallest fingerprint,
-- computed by union-find over near_pairs). Documents sharing a fingerprint
-- are in one cluster too. Every cluster of two or more documents is listed;
-- its representative is the first document by the keep rule:
--   ORDER BY {{keep_order}}
-- The fingerprints in a cluster (`clustered`: shared by two documents or
-- more, or with a near pair) are found first, so that the join of the
-- documents with them filters the second scan of `eligible` (the job runs
-- this statement with the filter evaluated in the Parquet reader): only the
-- documents in clusters go through its anti join (Weibo: 203,700 rows of
-- 768,035).
COPY (
  WITH clustered AS (
    SELECT simhash FROM eligible WHERE simhash IS NOT NULL GROUP BY simhash HAVING count(*) > 1
    UNION
    SELECT simhash FROM components
  ),
  members AS (
    SELECT f.*, COALESCE(c.cluster_id, f.simhash) AS cluster_id
    FROM eligible f
    JOIN clustered g ON f.simhash = g.simhash
    LEFT JOIN components c ON f.simhash = c.simhash
  ),
  ranked AS (
    SELECT source, id, simhash, cluster_id,
           count(*) OVER (PARTITION BY cluster_id) AS cluster_size,
           row_number() OVER (PARTITION BY cluster_id ORDER BY {{keep_order}}) AS rank
    FROM members
  )
  SELECT source, id, cluster_id, rank = 1 AS is_representative, cluster_size, simhash
  FROM ranked
  ORDER BY cluster_id, source, id
) TO {{path}} STORED AS PARQUET
