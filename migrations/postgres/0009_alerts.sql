-- Alerts for on-call. One row per alert from firing to resolved; a new breach after a
-- resolve opens a new row, so the table is also the history. At most one alert that is
-- not resolved per (rule, subject): the evaluator updates that one instead.
CREATE TABLE alerts (
    id              TEXT   PRIMARY KEY,
    rule            TEXT   NOT NULL,
    -- '' for the rule as a whole, 'tool:NAME' for a per-tool limit
    subject         TEXT   NOT NULL,
    severity        TEXT   NOT NULL,
    -- firing, acknowledged or resolved
    state           TEXT   NOT NULL,
    title           TEXT   NOT NULL,
    value           DOUBLE PRECISION   NOT NULL,
    threshold       DOUBLE PRECISION   NOT NULL,
    unit            TEXT   NOT NULL,
    -- JSON array of the runs, approvals and escalations behind it: [{kind, id, note}]
    items           TEXT   NOT NULL,
    fired_at        BIGINT NOT NULL,
    last_breach_at  BIGINT NOT NULL,
    acknowledged_by TEXT,
    acknowledged_at BIGINT,
    resolved_at     BIGINT,
    updated_at      BIGINT NOT NULL
);
CREATE UNIQUE INDEX alerts_one_open ON alerts (rule, subject) WHERE state <> 'resolved';
CREATE INDEX alerts_resolved ON alerts (resolved_at) WHERE state = 'resolved';

-- Admins' changes to a rule's settings (JSON); a rule without a row uses its defaults.
CREATE TABLE alert_rules (
    rule       TEXT   PRIMARY KEY,
    settings   TEXT   NOT NULL,
    updated_by TEXT,
    updated_at BIGINT NOT NULL
);

-- The last evaluation: which instance ran it and when, so on-call can see the evaluator
-- is alive. One row.
CREATE TABLE alert_evaluator (
    id           INTEGER PRIMARY KEY,
    instance     TEXT   NOT NULL,
    evaluated_at BIGINT NOT NULL,
    took_ms      BIGINT NOT NULL
);

-- Rule 1 reads irreversible executions in the last minutes; this keeps that a short
-- range read instead of a scan of every span. Partial, so other spans cost nothing.
CREATE INDEX spans_irreversible_end ON spans (end_ns) WHERE side_effect = 'irreversible';
