-- The trends' per-bucket totals, kept per arrival day of the runs they count (ADR 0023),
-- as on PostgreSQL, where each day's rows are a partition that retention drops with the
-- day. SQLite numbers runs from 1 and has no partitions: every run is day 0, so the rows
-- stored so far are copied as they are.
CREATE TABLE trend_runs_by_day (
    period_ms INTEGER NOT NULL,
    start_ms INTEGER NOT NULL,
    agent TEXT NOT NULL,
    model TEXT NOT NULL,
    terminal_reason TEXT NOT NULL,
    run_day INTEGER NOT NULL,
    runs INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL,
    no_read INTEGER NOT NULL,
    deduped_calls INTEGER NOT NULL,
    duplicate_side_effects INTEGER NOT NULL,
    cost_nano INTEGER NOT NULL,
    PRIMARY KEY (period_ms, start_ms, agent, model, terminal_reason, run_day)
) WITHOUT ROWID;
INSERT INTO trend_runs_by_day
SELECT period_ms, start_ms, agent, model, terminal_reason, 0, runs, tool_calls, no_read, deduped_calls,
       duplicate_side_effects, cost_nano
FROM trend_runs;
DROP TABLE trend_runs;
ALTER TABLE trend_runs_by_day RENAME TO trend_runs;

CREATE TABLE trend_values_by_day (
    period_ms INTEGER NOT NULL,
    scope TEXT NOT NULL,
    measure TEXT NOT NULL,
    start_ms INTEGER NOT NULL,
    value INTEGER NOT NULL,
    run_day INTEGER NOT NULL,
    runs INTEGER NOT NULL,
    value_sum INTEGER NOT NULL,
    PRIMARY KEY (period_ms, scope, measure, start_ms, value, run_day)
) WITHOUT ROWID;
INSERT INTO trend_values_by_day
SELECT period_ms, scope, measure, start_ms, value, 0, runs, value_sum FROM trend_values;
DROP TABLE trend_values;
ALTER TABLE trend_values_by_day RENAME TO trend_values;
