-- Per-bucket totals of the runs for /trends (issue 44), kept by every write that adds,
-- changes or deletes runs, so a chart reads its buckets instead of every run of its
-- range. One row per bucket size the page draws (`period_ms`: an hour, six hours, a day);
-- what each column holds is in `domain::trends::rollup`. The first start after this
-- migration fills them from the stored runs (`store::trends::build_rollups_if_new`).

-- Runs per bucket by agent, main model and terminal reason ('' for no agent or model).
CREATE TABLE trend_runs (
    period_ms BIGINT NOT NULL,
    start_ms BIGINT NOT NULL,
    agent TEXT NOT NULL,
    model TEXT NOT NULL,
    terminal_reason TEXT NOT NULL,
    runs BIGINT NOT NULL,
    no_read BIGINT NOT NULL,
    deduped_calls BIGINT NOT NULL,
    duplicate_side_effects BIGINT NOT NULL,
    cost_nano BIGINT NOT NULL,
    PRIMARY KEY (period_ms, start_ms, agent, model, terminal_reason)
);

-- Finished runs per bucket and value: per cost bin and per number of tool calls, for
-- every agent (scope '') and for each agent, with the sum of the values.
CREATE TABLE trend_values (
    period_ms BIGINT NOT NULL,
    scope TEXT NOT NULL,
    measure TEXT NOT NULL,
    start_ms BIGINT NOT NULL,
    value BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    value_sum BIGINT NOT NULL,
    PRIMARY KEY (period_ms, scope, measure, start_ms, value)
);

-- A row once the rollups hold every stored run.
CREATE TABLE trend_rollups_built (built_at BIGINT NOT NULL);
