-- The canonical run model. Spans keep their raw metadata (redacted, without bodies) next
-- to the canonical columns the mapping layer filled in; runs are recomputed from them.
-- Times in spans are Unix nanoseconds; elsewhere Unix milliseconds.

CREATE TABLE spans (
    trace_id          TEXT    NOT NULL,
    span_id           TEXT    NOT NULL,
    parent_span_id    TEXT,
    run_id            TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    kind              INTEGER NOT NULL,
    start_ns          BIGINT  NOT NULL,
    end_ns            BIGINT  NOT NULL,
    status_code       INTEGER NOT NULL,
    status_message    TEXT,
    agent             TEXT,
    run_trigger       TEXT,
    terminal_reason   TEXT,
    escalation_reason TEXT,
    cost              REAL,
    wall_clock_ms     BIGINT,
    role              TEXT,
    step_index        BIGINT,
    stop_reason       TEXT,
    model_id          TEXT,
    input_tokens      BIGINT,
    output_tokens     BIGINT,
    cache_tokens      BIGINT,
    tool_name         TEXT,
    side_effect       TEXT,
    idempotency_key   TEXT,
    attempt           BIGINT,
    outcome           TEXT,
    latency_ms        BIGINT,
    external_id       TEXT,
    args_sha256       TEXT,
    approval_id       TEXT,
    attributes        TEXT    NOT NULL,
    events            TEXT    NOT NULL,
    resource          TEXT    NOT NULL,
    received_at       BIGINT  NOT NULL,
    -- a re-sent span (same trace and span id) is stored once
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX spans_run ON spans (run_id);

-- Prompts, tool arguments and results, kept apart under the body retention policy.
CREATE TABLE span_bodies (
    trace_id TEXT   NOT NULL,
    span_id  TEXT   NOT NULL,
    run_id   TEXT   NOT NULL,
    bodies   TEXT   NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX span_bodies_run ON span_bodies (run_id);

-- Which run a trace belongs to. explicit = named by a span (run.id and the like); a trace
-- that has named no run yet belongs to the run with its own id until one does.
CREATE TABLE trace_runs (
    trace_id TEXT    PRIMARY KEY,
    run_id   TEXT    NOT NULL,
    explicit INTEGER   NOT NULL
);
CREATE INDEX trace_runs_run ON trace_runs (run_id);

CREATE TABLE runs (
    run_id                 TEXT    PRIMARY KEY,
    agent                  TEXT,
    run_trigger            TEXT    NOT NULL,
    terminal_reason        TEXT    NOT NULL,
    started_ns             BIGINT  NOT NULL,
    ended_ns               BIGINT,
    wall_clock_ms          BIGINT,
    cost                   REAL   NOT NULL,
    input_tokens           BIGINT  NOT NULL,
    output_tokens          BIGINT  NOT NULL,
    cache_tokens           BIGINT  NOT NULL,
    steps                  BIGINT  NOT NULL,
    tool_calls             BIGINT  NOT NULL,
    trace_ids              TEXT    NOT NULL,
    duplicate_side_effects BIGINT  NOT NULL,
    deduped_calls          BIGINT  NOT NULL,
    completed_without_read INTEGER   NOT NULL,
    approval_violations    BIGINT  NOT NULL,
    escalation_reason      TEXT,
    duplicates             TEXT    NOT NULL,
    updated_at             BIGINT  NOT NULL
);
CREATE INDEX runs_started ON runs (started_ns, run_id);
CREATE INDEX runs_reason_started ON runs (terminal_reason, started_ns);
CREATE INDEX runs_agent_started ON runs (agent, started_ns);

-- Tool-name patterns and the side-effect class they imply, for spans that declare none.
CREATE TABLE tool_policies (
    pattern     TEXT   PRIMARY KEY,
    side_effect TEXT   NOT NULL,
    updated_at  BIGINT NOT NULL
);
