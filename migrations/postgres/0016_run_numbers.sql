-- Every run gets a number in order of arrival (`run_no`), and the tables holding a run's
-- rows are indexed by that number instead of by `run_id`.
--
-- Agents name runs with random ids (UUIDs and the like), so each index keyed by run id
-- took every new run's entry on a random page: the ~150 runs of one ingest commit touched
-- ~150 distinct pages of each such index. Keyed by arrival number, new entries land on
-- the last page of the index. `run_id` stays in each table for readers that want it;
-- only the index moves. Lookups by run id go through `runs`. (Same change as SQLite's
-- 0016; PostgreSQL numbers from a sequence, as several instances may write.)

CREATE SEQUENCE runs_run_no_seq;
ALTER TABLE runs ADD COLUMN run_no BIGINT;
UPDATE runs SET run_no = nextval('runs_run_no_seq');
ALTER TABLE runs ALTER COLUMN run_no SET NOT NULL;
ALTER TABLE runs ALTER COLUMN run_no SET DEFAULT nextval('runs_run_no_seq');
ALTER SEQUENCE runs_run_no_seq OWNED BY runs.run_no;
CREATE UNIQUE INDEX runs_run_no ON runs (run_no);

-- Rows of a run without a `runs` row (no version of the write path leaves any) keep a
-- NULL number: no reader finds them, as no reader listed their run before.
ALTER TABLE span_chunks ADD COLUMN run_no BIGINT;
UPDATE span_chunks c SET run_no = r.run_no FROM runs r WHERE r.run_id = c.run_id;
DROP INDEX span_chunks_run;
CREATE INDEX span_chunks_run_no ON span_chunks (run_no, id);

ALTER TABLE body_chunks ADD COLUMN run_no BIGINT;
UPDATE body_chunks c SET run_no = r.run_no FROM runs r WHERE r.run_id = c.run_id;
DROP INDEX body_chunks_run;
CREATE INDEX body_chunks_run_no ON body_chunks (run_no, id);

ALTER TABLE irreversible_calls ADD COLUMN run_no BIGINT;
UPDATE irreversible_calls c SET run_no = r.run_no FROM runs r WHERE r.run_id = c.run_id;
DROP INDEX irreversible_calls_run;
CREATE INDEX irreversible_calls_run_no ON irreversible_calls (run_no);

ALTER TABLE trace_runs ADD COLUMN run_no BIGINT;
UPDATE trace_runs t SET run_no = r.run_no FROM runs r WHERE r.run_id = t.run_id;
DROP INDEX trace_runs_run;
CREATE INDEX trace_runs_run_no ON trace_runs (run_no);

-- `run_tools` is keyed by (run, tool): the number replaces the id in its key.
ALTER TABLE run_tools ADD COLUMN run_no BIGINT;
UPDATE run_tools t SET run_no = r.run_no FROM runs r WHERE r.run_id = t.run_id;
DELETE FROM run_tools WHERE run_no IS NULL;
ALTER TABLE run_tools ALTER COLUMN run_no SET NOT NULL;
ALTER TABLE run_tools DROP CONSTRAINT run_tools_pkey;
ALTER TABLE run_tools ADD PRIMARY KEY (run_no, tool_name);
