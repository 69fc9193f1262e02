-- Escalations: a run handed to a human. Opened by the agent API or from traces (a run
-- ending `escalated`, or a span carrying `escalation.reason`); both sources for one run
-- merge into one row. At most one open escalation per run.

CREATE TABLE escalations (
    id              TEXT   PRIMARY KEY,
    run_id          TEXT   NOT NULL,
    reason          TEXT   NOT NULL,
    reason_text     TEXT,
    blocking_fact   TEXT,
    -- JSON arrays: [{tool, description, external_id, idempotency_key, at}] and
    -- [{description, done, done_by, done_at}]
    what_was_done   TEXT   NOT NULL,
    what_remains    TEXT   NOT NULL,
    -- which sources reported it: api, trace, or both
    from_api        INTEGER NOT NULL,
    from_trace      INTEGER NOT NULL,
    idempotency_key TEXT,
    body_sha256     TEXT,
    agent           TEXT,
    requested_by    TEXT,
    status          TEXT   NOT NULL,
    opened_at       BIGINT NOT NULL,
    claimed_by      TEXT,
    claimed_at      BIGINT,
    resolved_by     TEXT,
    resolved_at     BIGINT,
    outcome         TEXT,
    resolution_note TEXT,
    instructions    TEXT,
    -- when the escalation.opened webhook was queued (NULL: not yet)
    notified_at     BIGINT
);
CREATE UNIQUE INDEX escalations_one_open_per_run ON escalations (run_id) WHERE status = 'open';
CREATE UNIQUE INDEX escalations_idempotency ON escalations (run_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX escalations_status_opened ON escalations (status, opened_at);
CREATE INDEX escalations_run ON escalations (run_id);

-- The timeline of an escalation: opened, merged, claimed, released, notes, ticked items,
-- resolved. Append-only.
CREATE TABLE escalation_events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    escalation_id TEXT   NOT NULL,
    at            BIGINT NOT NULL,
    actor         TEXT,
    kind          TEXT   NOT NULL,
    detail        TEXT
);
CREATE INDEX escalation_events_escalation ON escalation_events (escalation_id, id);
