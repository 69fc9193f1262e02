-- Results of regression tests run from replay fixtures (issue 26): an agent team posts
-- each fixture's outcome, and /trends charts the pass rate per agent over time.

CREATE TABLE replay_results (
    id           TEXT    PRIMARY KEY,
    agent        TEXT    NOT NULL,
    fixture      TEXT    NOT NULL,
    run_id       TEXT,
    passed       BOOLEAN NOT NULL,
    -- Redacted JSON the team sent about the result (a diff, the failing assertion).
    details      TEXT,
    recorded_at  BIGINT  NOT NULL
);
CREATE INDEX replay_results_recorded ON replay_results (recorded_at);
