-- Silences (issue 26): for a while, an alert matching a rule, agent or tool still fires
-- and shows, marked, but is not notified. alerts.silenced_by names the silence that held
-- back an alert's notification (NULL: notified as usual).

CREATE TABLE alert_silences (
    id          TEXT    PRIMARY KEY,
    rule        TEXT,
    agent       TEXT,
    tool        TEXT,
    reason      TEXT    NOT NULL,
    created_by  TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL,
    ends_at     BIGINT  NOT NULL,
    ended_by    TEXT,
    ended_at    BIGINT
);
CREATE INDEX alert_silences_ends ON alert_silences (ends_at);

ALTER TABLE alerts ADD COLUMN silenced_by TEXT;
