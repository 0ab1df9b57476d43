-- Store runs, before any pair: the stored fingerprints that tonight touches.
-- Every stored row is read once, by its compact columns only (simhash and
-- its MinHash band keys): night_touched probes tonight's documents, held in
-- memory from {{index}}, for equal fingerprints, fingerprints within k
-- (exactly, through the bands of {{m}} blocks) and shared MinHash keys.
-- Nothing stored is recomputed or rewritten; the bulky columns of the
-- fingerprints listed here are then fetched by page into `stored` (of each
-- fingerprint, its first row by source and id and its first by run, source
-- and id: all that the night's later statements read of it).
-- `file` numbers the data file of the row: a touched fingerprint's rows are
-- fetched from the files that hold it only.
SELECT DISTINCT file, simhash
FROM stored_runs
WHERE simhash IS NOT NULL
  AND night_touched(simhash, minhash, {{index}}, {{version}}, {{k}}, {{m}})
ORDER BY file, simhash
