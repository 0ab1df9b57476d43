-- What the candidate stage misses, counted exactly: every pair of distinct
-- fingerprints whose term sets reach Jaccard 0.5 (the default check), found
-- by brute force (jaccard_pairs over the whole corpus as one group: an exact
-- set-similarity join, src/setjoin.rs), against the near pairs of a
-- `dedup` run at the defaults with `--min-shared none` (the policy comes after
-- the candidates). Only fingerprints whose documents all have
-- one term set take part: of a fingerprint whose copies differ, the run
-- compares the term set of its largest consistent group of copies
-- (sql/56_unconfirmed_copies.sql), which the outputs do not say. On
-- `weibo_reposts` that leaves out 4.2 % of the fingerprints; counting them
-- by their first document gave 71 false misses at Jaccard 0.70 and above.
-- Tables: `fp` (the run's fingerprints/) and `pairs` (its pairs/). A near
-- pair is reported between its two fingerprints' anchors, so a pair of
-- documents with different fingerprints is a found pair of fingerprints.
-- Used by bench/quality/candidate_misses.py and tests/quality.rs.
CREATE VIEW reps AS
  SELECT simhash, first_value(term_set ORDER BY source, id) AS ts
  FROM fp WHERE simhash IS NOT NULL GROUP BY simhash
  HAVING count(DISTINCT term_set) = 1;
CREATE VIEW exact AS
  SELECT least(e.a, e.b) AS a, greatest(e.a, e.b) AS b, set_similarity(x.ts, y.ts, 'jaccard') AS s
  FROM (SELECT p['a'] AS a, p['b'] AS b
        FROM (SELECT unnest(jaccard_pairs(array_agg(simhash), array_agg(ts), array_agg(true), 0.5)) AS p FROM reps)) e
  JOIN reps x ON x.simhash = e.a
  JOIN reps y ON y.simhash = e.b;
CREATE VIEW found AS
  SELECT DISTINCT least(fa.simhash, fb.simhash) AS a, greatest(fa.simhash, fb.simhash) AS b
  FROM pairs p
  JOIN fp fa ON fa.source = p.source_a AND fa.id = p.id_a
  JOIN fp fb ON fb.source = p.source_b AND fb.id = p.id_b
  WHERE fa.simhash <> fb.simhash;
SELECT CASE WHEN e.s >= 0.7 THEN '0.70-1.00' WHEN e.s >= 0.55 THEN '0.55-0.70' ELSE '0.50-0.55' END AS similarity,
       count(*) AS exact_pairs,
       sum(CASE WHEN f.a IS NULL THEN 1 ELSE 0 END) AS missed
FROM exact e LEFT JOIN found f ON f.a = e.a AND f.b = e.b
GROUP BY 1
ORDER BY 1;
