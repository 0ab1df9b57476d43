-- Stage 1's input, when the run's work stays in memory: the documents read
-- once into memory, dealt to every core and sorted there by (source, id)
-- (stages.rs, hold_documents). Until segmentation is done this table stands
-- in for the view `documents`: boilerplate lines (15) and segmentation (20)
-- read it instead of decoding the inputs twice, and each partition of the
-- table of terms comes out in the order of 40_fingerprints.sql's output.
-- Sorting the texts costs less than sorting the terms after segmentation,
-- which are several times larger (Weibo: 33 MB of text, 221 MB of terms).
-- Under a memory limit or on a cluster the view is read as it is.
SELECT * FROM documents
