-- The trends' per-bucket totals, kept per arrival day of the runs they count (ADR 0023):
-- a run counts in the rows of the day its number was given on (`run_no >> 40`), in that
-- day's partition of each table, so retention drops a day's counts with the day's other
-- partitions instead of subtracting its runs from shared rows one row at a time (seconds
-- for a busy day). A bucket's runs that arrived on two days count in a row of each; the
-- page adds them up. The rows cannot be split by day from what is stored, so the tables
-- start empty and the first start after this migration adds every stored run up again
-- (`store::trends::build_rollups_if_new`).
DROP TABLE trend_runs;
DROP TABLE trend_values;

CREATE TABLE trend_runs (
    period_ms BIGINT NOT NULL,
    start_ms BIGINT NOT NULL,
    agent TEXT NOT NULL,
    model TEXT NOT NULL,
    terminal_reason TEXT NOT NULL,
    run_day BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    tool_calls BIGINT NOT NULL,
    no_read BIGINT NOT NULL,
    deduped_calls BIGINT NOT NULL,
    duplicate_side_effects BIGINT NOT NULL,
    cost_nano BIGINT NOT NULL,
    PRIMARY KEY (period_ms, start_ms, agent, model, terminal_reason, run_day)
) PARTITION BY RANGE (run_day);

CREATE TABLE trend_values (
    period_ms BIGINT NOT NULL,
    scope TEXT NOT NULL,
    measure TEXT NOT NULL,
    start_ms BIGINT NOT NULL,
    value BIGINT NOT NULL,
    run_day BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    value_sum BIGINT NOT NULL,
    PRIMARY KEY (period_ms, scope, measure, start_ms, value, run_day)
) PARTITION BY RANGE (run_day);

-- Runs numbered before the day partitions (ADR 0016) are day 0; every day listed in
-- run_no_days gets its partitions, as `store::partitions` makes them for each new day
-- (with room on each page for updates in place, as 0047 gave the tables before).
CREATE TABLE trend_runs_early PARTITION OF trend_runs FOR VALUES FROM (MINVALUE) TO (1) WITH (fillfactor = 70);
CREATE TABLE trend_values_early PARTITION OF trend_values FOR VALUES FROM (MINVALUE) TO (1) WITH (fillfactor = 70);
DO $$
DECLARE
    d BIGINT;
BEGIN
    FOR d IN SELECT day FROM run_no_days ORDER BY day LOOP
        EXECUTE format(
            'CREATE TABLE %I PARTITION OF trend_runs FOR VALUES FROM (%s) TO (%s) WITH (fillfactor = 70)',
            'trend_runs_' || to_char(to_timestamp(d * 86400) AT TIME ZONE 'UTC', 'YYYYMMDD'), d, d + 1);
        EXECUTE format(
            'CREATE TABLE %I PARTITION OF trend_values FOR VALUES FROM (%s) TO (%s) WITH (fillfactor = 70)',
            'trend_values_' || to_char(to_timestamp(d * 86400) AT TIME ZONE 'UTC', 'YYYYMMDD'), d, d + 1);
    END LOOP;
END
$$;

DELETE FROM trend_rollups_built;
