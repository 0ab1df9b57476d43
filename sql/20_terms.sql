-- Stage 1: normalise and segment every document exactly once ({{boilerplate}}
-- is NULL, or the boilerplate lines of 15_boilerplate_lines.sql).
-- term_stats gives, per distinct kept term: term, hash, count, tf and the
-- factors of the improved weight (cx, len, logo, title). The result is a
-- work table (in memory, or in the run's work folder under a memory limit:
-- docs/design.md, "Work files") and is read twice below: for the corpus document
-- frequencies and for the weights. The job runs this statement with small
-- scan batches dealt round robin to every core (see the runner). Row groups
-- of 1,024 documents let both readers spread the file over every core (one
-- row group is one scan partition). `term_count` lets 30_corpus_size.sql
-- count the documents with terms without decoding the terms. `shingles`
-- is the document's shingle sketch (src/text/shingles.rs): what the pairs'
-- shares of shared text are measured on, carried to the fingerprints.
-- text_features gives both, term_stats and shingle_sketch, from one pass
-- that strips and normalises the text once (Heybox: 0.1 s of the
-- statement's 2.5 s went to doing it twice).
COPY (
  SELECT *, list_length(terms) AS term_count
  FROM (
    SELECT source, id, n_chars{{keep_key}}, f['terms'] AS terms, f['shingles'] AS shingles
    FROM (
      SELECT source,
             id,
             CAST(character_length(text) AS BIGINT) AS n_chars{{keep_key}},
             text_features(text, title, {{tokenizer}}, {{analyzer_options}}, {{with_pos}}, {{boilerplate}}) AS f
      FROM documents
    )
  )
) TO {{path}} STORED AS PARQUET OPTIONS ('format.max_row_group_size' '1024', 'format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
