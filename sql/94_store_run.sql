-- Store runs, stage 5: tonight's documents as the store keeps them, each
-- with its representative. `components` labels every fingerprint with a
-- verified near pair tonight; documents sharing a fingerprint share a label.
-- The rule that keeps earlier nights consistent:
--   - a component that holds documents of earlier runs keeps their
--     representative: that of its earliest stored document (by run, then
--     source, id); clusters of earlier runs are never merged or changed,
--     and an earlier representative is never replaced;
--   - a component of tonight's documents only gets the first of them by the
--     keep rule ({{keep_order}}) as its representative;
--   - every other document (unique, without terms, or an unconfirmed copy)
--     is its own representative.
COPY (
  WITH labelled AS (
    SELECT f.source, f.id, f.n_chars{{keep_key}}, COALESCE(c.cluster_id, f.simhash) AS label
    FROM eligible f
    LEFT JOIN components c ON c.simhash = f.simhash
    WHERE f.simhash IS NOT NULL
  ),
  labels AS (
    SELECT label FROM labelled GROUP BY label HAVING count(*) > 1
    UNION
    SELECT cluster_id FROM components
  ),
  old AS (
    SELECT s.run, s.source, s.id, s.representative_source, s.representative_id,
           COALESCE(c.cluster_id, s.simhash) AS label
    FROM stored s
    LEFT JOIN components c ON c.simhash = s.simhash
    WHERE s.simhash IS NOT NULL
      AND s.simhash IN (SELECT simhash FROM fingerprints UNION SELECT simhash FROM components)
  ),
  old_first AS (
    SELECT label, representative_source, representative_id
    FROM (
      SELECT label, representative_source, representative_id,
             row_number() OVER (PARTITION BY label ORDER BY run, source, id) AS r
      FROM old
    )
    WHERE r = 1
  ),
  night_first AS (
    SELECT label, source, id
    FROM (
      SELECT label, source, id, row_number() OVER (PARTITION BY label ORDER BY {{keep_order}}) AS r
      FROM labelled
      WHERE label IN (SELECT label FROM labels)
    )
    WHERE r = 1
  )
  SELECT f.source, f.id, f.simhash, f.n_terms, f.n_chars, f.term_set{{keep_key_f}},
         CASE WHEN o.label IS NOT NULL THEN o.representative_source
              WHEN n.label IS NOT NULL THEN n.source
              ELSE f.source END AS representative_source,
         CASE WHEN o.label IS NOT NULL THEN o.representative_id
              WHEN n.label IS NOT NULL THEN n.id
              ELSE f.id END AS representative_id,
         CAST({{run}} AS VARCHAR) AS run
  FROM fingerprints f
  LEFT JOIN labelled l ON l.source = f.source AND l.id = f.id
  LEFT JOIN old_first o ON o.label = l.label
  LEFT JOIN night_first n ON n.label = l.label
  ORDER BY f.source, f.id
) TO {{path}} STORED AS PARQUET OPTIONS ('format.max_row_group_size' '65536')
