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
-- `stored` holds only the stored documents that tonight touches (those
-- sharing a fingerprint with tonight's or near one, see 89_store_probe.sql):
-- every stored document this statement reads is among them.
-- The partition is sorted by fingerprint, in pages of at most 256 rows with
-- a page index (written by the client from this query's sorted stream,
-- src/storage/sorted.rs), so a later night fetches the rows of a few
-- fingerprints without reading the rest; doc_key (a hash of source and id) lets a night
-- find the documents it already holds by one 8-byte column, and its MinHash
-- keys are packed into one binary value (pack_keys), which the probe of every
-- later night decodes at a tenth of the cost of a list.
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
  SELECT s.run, s.source, s.id, s.representative_source, s.representative_id, s.representative_run,
         COALESCE(c.cluster_id, s.simhash) AS label
  FROM stored s
  LEFT JOIN components c ON c.simhash = s.simhash
  WHERE s.simhash IS NOT NULL
    AND s.simhash IN (SELECT simhash FROM fingerprints UNION SELECT simhash FROM components)
),
old_first AS (
  SELECT label, representative_source, representative_id, representative_run
  FROM (
    SELECT label, representative_source, representative_id, representative_run,
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
SELECT f.source, f.id, hash64(f.source || chr(0) || f.id) AS doc_key,
       f.simhash, f.n_terms, f.n_chars, f.term_set, pack_keys(f.minhash) AS minhash, f.shingles, f.vector{{keep_key_f}},
       CASE WHEN o.label IS NOT NULL THEN o.representative_source
            WHEN n.label IS NOT NULL THEN n.source
            ELSE f.source END AS representative_source,
       CASE WHEN o.label IS NOT NULL THEN o.representative_id
            WHEN n.label IS NOT NULL THEN n.id
            ELSE f.id END AS representative_id,
       arrow_cast(CASE WHEN o.label IS NOT NULL THEN o.representative_run ELSE {{run}} END, 'Utf8View')
         AS representative_run,
       arrow_cast({{run}}, 'Utf8View') AS run
FROM fingerprints f
LEFT JOIN labelled l ON l.source = f.source AND l.id = f.id
LEFT JOIN old_first o ON o.label = l.label
LEFT JOIN night_first n ON n.label = l.label
ORDER BY f.simhash NULLS LAST, f.source, f.id
