-- Documents of one input dataset: (source, id, text, title[, keep_key]).
-- The job renders this once per --input and joins the results with UNION ALL
-- into the view `documents`, so every later step sees one corpus.
SELECT {{source}} AS source,
       CAST({{id}} AS VARCHAR) AS id,
       {{text}} AS text,
       {{title}} AS title{{keep_key}}
FROM {{table}}
