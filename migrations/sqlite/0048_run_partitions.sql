-- PostgreSQL keeps a run id's number in `run_ids` since its `runs` is partitioned by day
-- (ADR 0018); every lookup of a run by id reads that name first. SQLite's `runs` is one
-- table whose primary key is the run id, so here the name is a view of it.
CREATE VIEW run_ids AS SELECT run_id, run_no FROM runs;
