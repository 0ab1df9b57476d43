-- Stage 5, part one (one-shot runs): the eligible documents that a cluster
-- holds, each with its cluster. `eligible` is the fingerprints less the
-- copies that failed verification (56_unconfirmed_copies.sql; in memory,
-- made by the client, 56_copies_in_memory.sql); `components` maps every
-- fingerprint that has a near pair to its component (labelled by the
-- component's smallest fingerprint, computed by union-find over
-- near_pairs). Documents sharing a fingerprint are in one cluster too.
-- The clusters, their anchors and the pairs (60, 69, 70) are made from
-- these rows alone (Weibo: 203,712 of 768,035 documents), and `eligible`
-- is read once.
-- A store run's night finds its clusters otherwise (94, 95), and gives 69
-- and 70 a view of the same name.
-- The fingerprints in a cluster (`clustered`: shared by two documents or
-- more, or with a near pair) are found first, so that the join of the
-- documents with them filters the second scan of `eligible` (the job runs
-- this statement with the filter evaluated in the Parquet reader).
COPY (
  WITH clustered AS (
    SELECT simhash FROM eligible WHERE simhash IS NOT NULL GROUP BY simhash HAVING count(*) > 1
    UNION
    SELECT simhash FROM components
  )
  SELECT source, id, f.simhash, shingles{{keep_columns}}, COALESCE(c.cluster_id, f.simhash) AS cluster_id
  FROM eligible f
  JOIN clustered g ON f.simhash = g.simhash
  LEFT JOIN components c ON f.simhash = c.simhash
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
