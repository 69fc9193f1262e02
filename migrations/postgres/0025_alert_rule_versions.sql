-- Rule and threshold changes are versioned (issue 26): every save of a rule's settings is
-- kept, and an alert records the version in force when it fired, so the alert page can
-- show the thresholds that fired it even after they changed. Version 0 is the defaults.

CREATE TABLE alert_rule_versions (
    rule        TEXT    NOT NULL,
    version     BIGINT  NOT NULL,
    settings    TEXT    NOT NULL,
    updated_by  TEXT,
    updated_at  BIGINT  NOT NULL,
    PRIMARY KEY (rule, version)
);

-- What admins saved before versions were kept becomes each rule's version 1.
INSERT INTO alert_rule_versions (rule, version, settings, updated_by, updated_at)
    SELECT rule, 1, settings, updated_by, updated_at FROM alert_rules;
ALTER TABLE alert_rules ADD COLUMN version BIGINT NOT NULL DEFAULT 1;

-- NULL: fired before versions were kept.
ALTER TABLE alerts ADD COLUMN rule_version BIGINT;
