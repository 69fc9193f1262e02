-- What operators see is true for agents on standard instrumentation (issue 21): a run's
-- cost says where it came from, model prices an admin sets, and every tool seen with
-- what it takes to classify it.

-- `agent` (sent as budget.cost_spent), `prices` (derived from tokens), `partial` (some
-- models had no price), `unpriced` (none had), `none` (no cost, no tokens). Rows stored
-- before this migration only ever had the agent's figure.
ALTER TABLE runs ADD COLUMN cost_source TEXT NOT NULL DEFAULT 'agent';
-- JSON array of the models without a price, when the source is partial or unpriced.
ALTER TABLE runs ADD COLUMN unpriced_models TEXT;
-- Repeats of an unclassified tool with the same arguments (not in duplicate_side_effects).
ALTER TABLE runs ADD COLUMN possible_duplicates BIGINT NOT NULL DEFAULT 0;

-- Prices set on the admin page; they override the config file and the shipped table.
-- Dollars per million tokens; a NULL cache or reasoning price means the input (cache)
-- or output (reasoning) price.
CREATE TABLE model_prices (
    pattern     TEXT             NOT NULL,
    valid_from  TEXT             NOT NULL,
    input       DOUBLE PRECISION NOT NULL,
    output      DOUBLE PRECISION NOT NULL,
    cache_read  DOUBLE PRECISION,
    cache_write DOUBLE PRECISION,
    reasoning   DOUBLE PRECISION,
    updated_at  BIGINT           NOT NULL,
    PRIMARY KEY (pattern, valid_from)
);

-- Every tool name ingest has seen: calls counted as they are stored (from this migration
-- on), first and last seen, the class its spans last declared, and its MCP annotations
-- when spans carry them. The admin's tools page reads it; how many runs called a tool
-- comes from `run_tools`.
CREATE TABLE tools (
    tool_name        TEXT   PRIMARY KEY,
    calls            BIGINT NOT NULL DEFAULT 0,
    first_seen_ns    BIGINT NOT NULL,
    last_seen_ns     BIGINT NOT NULL,
    declared_class   TEXT,
    read_only_hint   BOOLEAN,
    destructive_hint BOOLEAN
);
INSERT INTO tools (tool_name, calls, first_seen_ns, last_seen_ns)
SELECT tool_name, 0, MIN(started_ns), MAX(started_ns) FROM run_tools GROUP BY tool_name;

-- The run list sorts by duplicate side effects too.
CREATE INDEX runs_duplicates ON runs (duplicate_side_effects, run_id);
-- The prices page lists models runs used that have no price.
CREATE INDEX runs_unpriced ON runs (started_ns) WHERE unpriced_models IS NOT NULL;
