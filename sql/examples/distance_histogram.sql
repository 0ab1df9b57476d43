-- How far apart are the reported pairs? (run on a dedup output folder)
--   neardup sql --table pairs=OUT/pairs -f sql/examples/distance_histogram.sql
SELECT hamming, count(*) AS pairs, round((64 - hamming) / 64.0, 3) AS similarity
FROM pairs
GROUP BY hamming
ORDER BY hamming;
