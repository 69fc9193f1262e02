-- The execution ledger (issue 24): one entry per idempotency key of a guarded call, the
-- agent asks before a side effect and reports after it, so a retried, resumed or
-- handed-back run finds what was already done.

CREATE TABLE call_ledger (
    id               TEXT    PRIMARY KEY,
    idempotency_key  TEXT    NOT NULL UNIQUE,
    natural_key      TEXT    NOT NULL,
    run_id           TEXT    NOT NULL,
    step_index       BIGINT  NOT NULL,
    tool             TEXT    NOT NULL,
    -- Redacted canonical JSON of the arguments of the latest attempt.
    arguments        TEXT    NOT NULL,
    -- awaiting_approval | started | succeeded | failed | unknown | not_done | denied
    state            TEXT    NOT NULL,
    attempts         BIGINT  NOT NULL DEFAULT 1,
    -- Asks answered already_done: the deduped count the article asks for.
    deduped          BIGINT  NOT NULL DEFAULT 0,
    external_id      TEXT,
    -- Redacted, size-capped JSON the agent asked to be returned on already_done.
    response         TEXT,
    error            TEXT,
    verified_by      TEXT,
    approval_id      TEXT,
    escalation_id    TEXT,
    settled_by       TEXT,
    requested_by_token BIGINT,
    created_at       BIGINT  NOT NULL,
    started_at       BIGINT  NOT NULL,
    completed_at     BIGINT,
    updated_at       BIGINT  NOT NULL
);
CREATE INDEX call_ledger_run ON call_ledger (run_id, step_index);
CREATE INDEX call_ledger_state ON call_ledger (state, started_at);

-- Per tool: which argument fields are left out of a derived key (JSON array; NULL = the
-- article's list), whether the key is run-wide (the step left out), how long a success
-- answers already_done, and how long a started call may run before its outcome is unknown.
ALTER TABLE tool_policies ADD COLUMN volatile_fields TEXT;
ALTER TABLE tool_policies ADD COLUMN run_wide_key BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE tool_policies ADD COLUMN ledger_window_seconds BIGINT;
ALTER TABLE tool_policies ADD COLUMN call_timeout_seconds BIGINT;
