-- Optional: the rows of one input that survive deduplication, with all their
-- columns: every row except the non-representative members of a cluster.
COPY (
  SELECT i.*
  FROM {{table}} i
  WHERE NOT EXISTS (
    SELECT 1 FROM clusters c
    WHERE c.source = {{source}} AND NOT c.is_representative AND c.id = CAST(i.{{id}} AS VARCHAR)
  )
) TO {{path}} STORED AS PARQUET
