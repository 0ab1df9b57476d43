-- The report (report.html): the near misses, candidates the check rejected
-- a little below its threshold, by bin of similarity. They are in no output
-- table, so they are counted here, before the run's work files go, and kept
-- in summary.json. One candidate in {{stride}} is scored again (the residue
-- of simhash_b's low 20 bits, hash bits, picks a fair sample; the mask also
-- keeps DataFusion 55's interval analysis, which misreads the UInt64
-- statistics of a plain modulo, away); the caller scales the counts back.
SELECT bin, count(*) AS n
FROM (
  SELECT CASE WHEN similarity < {{threshold}} AND similarity >= {{low}}
              THEN CAST(floor(similarity / {{bin_width}}) AS BIGINT) END AS bin
  FROM (
    SELECT CASE WHEN {{measure}} = 'cosine' THEN simhash_cosine(x.vector, y.vector)
                ELSE set_similarity(x.term_set, y.term_set, {{measure}}) END AS similarity
    FROM (SELECT DISTINCT simhash_a, simhash_b FROM candidates WHERE (simhash_b & 1048575) % {{stride}} = 0) c
    JOIN term_sets x ON x.simhash = c.simhash_a
    JOIN term_sets y ON y.simhash = c.simhash_b
  )
)
GROUP BY bin
-- The candidates outside the reach fall in the NULL bin, left out by a
-- condition on an aggregate: the engine pushed a WHERE on the similarity
-- into the join as its filter and computed the similarity there for every
-- candidate, then again for the rows kept (Heybox: the statement 137 ms).
HAVING max(bin) IS NOT NULL
ORDER BY bin
