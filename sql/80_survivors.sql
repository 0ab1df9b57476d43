-- Optional: the rows of one input that survive deduplication, with all their
-- columns: every row except the non-representative members of a cluster.
-- With --duplicate-ids keep-first, {{one_row_per_id}} keeps of an id's rows
-- only the one the documents kept (a QUALIFY clause ranking them as the
-- documents did); otherwise it is empty.
COPY (
  SELECT i.*
  FROM {{table}} i
  WHERE NOT EXISTS (
    SELECT 1 FROM clusters c
    WHERE c.source = {{source}} AND NOT c.is_representative AND c.id = CAST(i.{{id}} AS VARCHAR)
  )
  {{one_row_per_id}}
) TO {{path}} STORED AS PARQUET
