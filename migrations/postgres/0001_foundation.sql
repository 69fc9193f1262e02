-- Accounts, agent API tokens and the audit log. Times are Unix milliseconds.

CREATE TABLE users (
    id            BIGSERIAL PRIMARY KEY,
    username      TEXT   NOT NULL UNIQUE,
    password_hash TEXT   NOT NULL,
    roles         TEXT   NOT NULL,
    -- bumped on password reset; sessions from an older epoch are signed out
    session_epoch BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL
);

CREATE TABLE api_tokens (
    id            BIGSERIAL PRIMARY KEY,
    name          TEXT   NOT NULL,
    prefix        TEXT   NOT NULL,
    secret_sha256 TEXT   NOT NULL UNIQUE,
    scopes        TEXT   NOT NULL,
    created_at    BIGINT NOT NULL,
    created_by    TEXT,
    last_used_at  BIGINT,
    revoked_at    BIGINT
);

CREATE TABLE audit_log (
    id     BIGSERIAL PRIMARY KEY,
    at     BIGINT NOT NULL,
    actor  TEXT,
    action TEXT   NOT NULL,
    target TEXT,
    detail TEXT,
    source TEXT
);

-- the sign-in rate limit counts recent failures by username and by address
CREATE INDEX audit_log_action_target_at ON audit_log (action, target, at);
CREATE INDEX audit_log_action_source_at ON audit_log (action, source, at);
