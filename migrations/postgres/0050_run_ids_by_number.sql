-- `run_ids` by number as well as by id: retention drops a day's runs with their
-- partitions and deletes their `run_ids` rows by the day's number range, one walk of
-- this index, instead of looking up each of the day's ids in the primary key (a random
-- page per run, growing with the history). Numbers are given in arrival order, so a
-- new run's entry goes at the index's right edge.
CREATE INDEX run_ids_run_no ON run_ids (run_no);
