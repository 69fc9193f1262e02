-- The execution ledger in a SQLite file of its own (`flightdeck.ledger.db` beside
-- `flightdeck.db`), with its own write lock, so an agent's ask never waits for an ingest
-- commit in the main file (docs/adr/0011-ledger-file.md). The same tables as the main
-- file's migrations 0020 and 0021 made; `Db::migrate` copies what an older release kept
-- there, then the main file's 0036 drops them.

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
    -- Ids in the main file (approvals, escalations); no foreign keys across files.
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

-- Guarded calls answered already_done, per UTC hour and tool, for the trends page.
CREATE TABLE call_ledger_hours (
    hour_ms  BIGINT  NOT NULL,
    tool     TEXT    NOT NULL,
    deduped  BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (hour_ms, tool)
);
