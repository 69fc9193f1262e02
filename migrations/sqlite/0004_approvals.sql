-- Per-call approval: tool policies say which tools need one and who may give it; each
-- request binds a decision to the exact payload (tool + arguments) by its SHA-256; ingest
-- checks executed tool calls against the approvals they name and records violations.

ALTER TABLE tool_policies ADD COLUMN requires_approval INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tool_policies ADD COLUMN approver_role TEXT NOT NULL DEFAULT 'approver';
ALTER TABLE tool_policies ADD COLUMN expiry_seconds BIGINT;
ALTER TABLE tool_policies ADD COLUMN run_limit BIGINT;

CREATE TABLE approvals (
    id               TEXT    PRIMARY KEY,
    run_id           TEXT    NOT NULL,
    step_index       BIGINT,
    tool             TEXT    NOT NULL,
    -- canonical JSON (sorted keys, no whitespace): exactly what was hashed
    arguments        TEXT    NOT NULL,
    -- JSON array of {label, value}: what the agent asked the approver to read first
    display          TEXT    NOT NULL,
    idempotency_key  TEXT,
    payload_sha256   TEXT    NOT NULL,
    -- the SHA-256 ingest computes for a tool span's arguments, to match executions
    arguments_sha256 TEXT    NOT NULL,
    side_effect      TEXT    NOT NULL,
    required_role    TEXT    NOT NULL,
    agent            TEXT,
    requested_by     TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    created_at       BIGINT  NOT NULL,
    expires_at       BIGINT  NOT NULL,
    decided_by       TEXT,
    decided_at       BIGINT,
    reason           TEXT,
    -- the tool span that executed under this approval (trace_id:span_id); an approval is
    -- good for one execution
    used_by_span     TEXT,
    used_at          BIGINT
);
CREATE UNIQUE INDEX approvals_idempotency ON approvals (run_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX approvals_status_created ON approvals (status, created_at);
CREATE INDEX approvals_run ON approvals (run_id);
CREATE INDEX approvals_decided ON approvals (decided_at) WHERE decided_at IS NOT NULL;

-- A tool call that ran without a valid approval. One row per span and kind, so a re-sent
-- span records nothing twice.
CREATE TABLE approval_violations (
    trace_id    TEXT   NOT NULL,
    span_id     TEXT   NOT NULL,
    kind        TEXT   NOT NULL,
    run_id      TEXT   NOT NULL,
    tool        TEXT   NOT NULL,
    approval_id TEXT,
    detail      TEXT   NOT NULL,
    at          BIGINT NOT NULL,
    PRIMARY KEY (trace_id, span_id, kind)
);
CREATE INDEX approval_violations_run ON approval_violations (run_id);
CREATE INDEX approval_violations_at ON approval_violations (at);
