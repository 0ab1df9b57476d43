-- Store runs, the night's report: tonight's documents that belong to a
-- cluster (`night`, the run just written by 94_store_run.sql), with their
-- representative. `representative_run` says where the representative was
-- stored: tonight (this run) or an earlier run, whose cluster the document
-- joined (each run keeps it beside the representative, so no earlier run is
-- read here).
COPY (
  WITH reps AS (
    SELECT DISTINCT representative_source AS source, representative_id AS id
    FROM night
    WHERE NOT (representative_source = source AND representative_id = id)
  )
  SELECT n.source, n.id, n.representative_source, n.representative_id,
         (n.representative_source = n.source AND n.representative_id = n.id) AS is_representative,
         n.representative_run,
         n.simhash
  FROM night n
  WHERE NOT (n.representative_source = n.source AND n.representative_id = n.id)
     OR EXISTS (SELECT 1 FROM reps r WHERE r.source = n.source AND r.id = n.id)
  ORDER BY n.representative_source, n.representative_id, n.source, n.id
) TO {{path}} STORED AS PARQUET
