-- Stage 6, part one: the document each fingerprint that can give a pair is
-- anchored at (70_pairs.sql): its first stored document by (source, id),
-- or, if no earlier run has it, its first eligible document of tonight, so
-- that anchors stay in earlier runs, which tonight does not change
-- (`stored` is empty in a one-shot run).
-- Only the fingerprints that can give a pair are anchored: those of the
-- report's `clusters` (60_clusters.sql, or tonight's, 95_store_clusters.sql)
-- and the stored ones of a near pair (anchoring every fingerprint of
-- `weibo_reposts` took 8 times as long).
-- Each anchor carries its shingle sketch, which the pairs' shares of shared
-- text are measured on: tonight's from the documents in clusters
-- (`in_clusters`, 59_in_clusters.sql, or a night's view), a stored one from
-- `stored_term_sets`, where the night fetched its fingerprint's first stored
-- document (NULL for a document stored before sketches were kept).
-- Made once, because the pairs join it three times: as part of their
-- statement, it was ranked three times. The documents are ranked without
-- their sketches, and a tonight's anchor's sketch is joined back from
-- `in_clusters` on (simhash, source, id), one document in a run: ranked
-- with them, every sketch of every document in a cluster was moved and
-- sorted for the few anchors (Weibo: 203,712 documents for 27,894).
-- A work table: in memory when the run's work is (query::work_table), else
-- written and read back.
COPY (
  WITH everyone AS (
    SELECT simhash, source, id, 1 AS tonight FROM in_clusters
    UNION ALL
    SELECT simhash, source, id, 0 AS tonight FROM stored
    WHERE simhash IN (SELECT simhash FROM clusters UNION SELECT simhash_a FROM near_pairs UNION SELECT simhash_b FROM near_pairs)
  ),
  firsts AS (
    SELECT simhash, source, id, tonight
    FROM (
      SELECT simhash, source, id, tonight,
             row_number() OVER (PARTITION BY simhash ORDER BY tonight, source, id) AS r
      FROM everyone
    )
    WHERE r = 1
  )
  SELECT a.simhash, a.source, a.id, COALESCE(c.shingles, s.shingles) AS shingles
  FROM firsts a
  LEFT JOIN in_clusters c ON a.tonight = 1 AND c.simhash = a.simhash AND c.source = a.source AND c.id = a.id
  LEFT JOIN stored_term_sets s ON a.tonight = 0 AND s.simhash = a.simhash AND s.source = a.source AND s.id = a.id
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
