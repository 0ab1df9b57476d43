-- Stage 4, MinHash part two: candidate pairs of distinct fingerprints that
-- share a bucket (`minhash_buckets`, 51_minhash_buckets.sql).
-- As in 50_near_pairs.sql, one side is always tonight's, stored pairs are
-- never joined again, and pairs of tonight's fingerprints come once.
-- A bucket of at most {{hot}} members lists every pair. A larger one, a
-- *hot* bucket (a frequent term that fills a band of thousands of short
-- posts), gives only its pairs whose Jaccard similarity reaches
-- {{threshold}}: jaccard_pairs finds them exactly (src/setjoin.rs), so the
-- check keeps the same pairs as if every pair had been listed. ({{hot}} is
-- unbounded when the check is not Jaccard.)
-- Every candidate is then checked by 55_verified_pairs.sql.
COPY (
  WITH listed AS (
    SELECT key, simhash, tonight FROM minhash_buckets WHERE members <= {{hot}}
  ),
  hot AS (
    SELECT unnest(pairs) AS p
    FROM (
      SELECT jaccard_pairs(array_agg(t.simhash), array_agg(t.term_set), array_agg(t.tonight), {{threshold}}) AS pairs
      FROM minhash_buckets k
      JOIN term_sets t ON t.simhash = k.simhash
      WHERE k.members > {{hot}}
      GROUP BY k.key
    )
  ),
  found AS (
    SELECT a.simhash AS x, b.simhash AS y
    FROM listed a
    JOIN listed b ON a.key = b.key
    WHERE a.tonight
      AND a.simhash <> b.simhash
      AND (NOT b.tonight OR a.simhash < b.simhash)
    UNION ALL
    SELECT p['a'], p['b'] FROM hot
  )
  SELECT least(x, y) AS simhash_a,
         greatest(x, y) AS simhash_b,
         hamming(x, y) AS hamming,
         CAST(NULL AS DOUBLE) AS similarity
  FROM found
  GROUP BY least(x, y), greatest(x, y), hamming(x, y)
  ORDER BY simhash_a, simhash_b
) TO {{path}} STORED AS PARQUET OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')
