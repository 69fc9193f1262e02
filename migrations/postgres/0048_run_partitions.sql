-- `runs` partitioned by the day each run arrived, as the span-side tables are (0044,
-- ADR 0018): each day's indexes on cost, duration and run id stay a day's size, so a
-- write touches small indexes however long the history grows, and retention drops a
-- day's runs with its partitions.
--
-- A partitioned table's unique keys must hold its partition key, so a run id's
-- uniqueness moves to `run_ids`, a narrow map from id to number that every lookup by id
-- reads first. The rows stored so far stay in `runs_early`, attached, not copied: it holds
-- every number below the first day that has no partitions yet (store::partitions makes
-- a `runs` partition for each day it makes from now on, marked in run_no_days).

CREATE TABLE run_ids (
    run_id TEXT   PRIMARY KEY,
    run_no BIGINT NOT NULL
);
INSERT INTO run_ids (run_id, run_no) SELECT run_id, run_no FROM runs;

ALTER TABLE run_no_days ADD COLUMN runs_partition BOOLEAN NOT NULL DEFAULT FALSE;

ALTER TABLE runs RENAME TO runs_early;
ALTER TABLE runs_early DROP CONSTRAINT runs_pkey;
ALTER INDEX runs_started RENAME TO runs_early_started;
ALTER INDEX runs_reason_started RENAME TO runs_early_reason_started;
ALTER INDEX runs_agent_started RENAME TO runs_early_agent_started;
ALTER INDEX runs_cost RENAME TO runs_early_cost;
ALTER INDEX runs_deduped_calls RENAME TO runs_early_deduped_calls;
ALTER INDEX runs_ended_cost RENAME TO runs_early_ended_cost;
ALTER INDEX runs_run_no RENAME TO runs_early_run_no;
ALTER INDEX runs_unpriced RENAME TO runs_early_unpriced;
ALTER INDEX runs_flag_no_read RENAME TO runs_early_flag_no_read;
ALTER INDEX runs_flag_duplicates RENAME TO runs_early_flag_duplicates;
ALTER INDEX runs_trigger_started RENAME TO runs_early_trigger_started;
ALTER INDEX runs_agent_reason RENAME TO runs_early_agent_reason;
ALTER INDEX runs_failed_ended RENAME TO runs_early_failed_ended;
ALTER INDEX runs_duration RENAME TO runs_early_duration;
ALTER INDEX runs_duplicates_some RENAME TO runs_early_duplicates_some;
ALTER INDEX runs_flag_violations RENAME TO runs_early_flag_violations;

CREATE TABLE runs (LIKE runs_early INCLUDING DEFAULTS) PARTITION BY RANGE (run_no);
ALTER SEQUENCE runs_run_no_seq OWNED BY runs.run_no;
DO $$
DECLARE
    bound BIGINT;
BEGIN
    -- Past every number given so far: the day after the latest with partitions.
    SELECT COALESCE(MAX(day) + 1, 1) << 40 INTO bound FROM run_no_days;
    EXECUTE format('ALTER TABLE runs ATTACH PARTITION runs_early FOR VALUES FROM (MINVALUE) TO (%s)', bound);
END
$$;

-- Each index on the parent takes over the partition's matching one.
CREATE UNIQUE INDEX runs_run_no ON runs (run_no);
CREATE INDEX runs_started ON runs (started_ns, run_id);
CREATE INDEX runs_reason_started ON runs (terminal_reason, started_ns);
CREATE INDEX runs_agent_started ON runs (agent, started_ns);
CREATE INDEX runs_cost ON runs (cost, run_id);
CREATE INDEX runs_deduped_calls ON runs (deduped_calls) WHERE deduped_calls > 0;
CREATE INDEX runs_ended_cost ON runs (ended_ns, cost);
CREATE INDEX runs_unpriced ON runs (started_ns) WHERE unpriced_models IS NOT NULL;
CREATE INDEX runs_flag_no_read ON runs (started_ns, run_id, terminal_reason) WHERE completed_without_read = TRUE;
CREATE INDEX runs_flag_duplicates ON runs (started_ns, run_id, terminal_reason) WHERE duplicate_side_effects > 0;
CREATE INDEX runs_trigger_started ON runs (run_trigger, started_ns, run_id, terminal_reason);
CREATE INDEX runs_agent_reason ON runs (agent, terminal_reason);
CREATE INDEX runs_failed_ended ON runs (ended_ns) WHERE terminal_reason = 'error';
CREATE INDEX runs_duration ON runs ((COALESCE(wall_clock_ms, -1)), run_id);
CREATE INDEX runs_duplicates_some ON runs (duplicate_side_effects, run_id, terminal_reason) WHERE duplicate_side_effects > 0;
CREATE INDEX runs_flag_violations ON runs (started_ns, run_id, terminal_reason, approval_violations) WHERE approval_violations > 0;
-- The list sorted by duplicates walks the runs without any by id (0035); lookups by id
-- read `run_ids`. Built anew on `runs_early` (its primary key was unique, this is not).
CREATE INDEX runs_run_id ON runs (run_id);
