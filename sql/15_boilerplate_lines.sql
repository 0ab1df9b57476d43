-- Optional stage 0: boilerplate lines. A short line (at most 80 characters,
-- compared after normalisation) found in at least {{min_docs}} documents of
-- the corpus is site furniture — navigation, footers, notices — not content. Segmentation
-- drops these lines from every document (term_stats' boilerplate argument),
-- unless a document has nothing else.
SELECT h AS line_hash
FROM (SELECT unnest(line_hashes(text)) AS h FROM documents)
GROUP BY h
HAVING count(*) >= {{min_docs}}
ORDER BY line_hash
