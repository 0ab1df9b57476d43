-- Optional: the rows of one input that survive deduplication, with all their
-- columns: every row except the non-representative members of a cluster
-- (`surviving`), in the input's order. The query below them selects all of
-- them; or, with --duplicate-ids keep-first and ids that repeat, one file
-- the rows of the other ids, a second of each repeated id the one row the
-- documents kept, in id order (inputs.rs, `surviving_rows`).
COPY (
  WITH surviving AS (
    SELECT i.*
    FROM {{table}} i
    WHERE NOT EXISTS (
      SELECT 1 FROM clusters c
      WHERE c.source = {{source}} AND NOT c.is_representative AND c.id = CAST(i.{{id}} AS VARCHAR)
    )
  )
  {{rows}}
) TO {{path}} STORED AS PARQUET
