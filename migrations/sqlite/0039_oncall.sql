-- On-call and escalations (issue 40).

-- When the run needed a person: the time of the run's `escalation` span event (or of the
-- span or run that reported it), or the API filing time; `opened_at` stays the time the
-- escalation was stored. The queue's waiting time and its order, the backlog alert and
-- the navigation count from it. Earlier escalations needed a person when they were stored.
ALTER TABLE escalations ADD COLUMN needed_at BIGINT;
UPDATE escalations SET needed_at = opened_at;
CREATE INDEX escalations_status_needed ON escalations (status, needed_at, id);

-- When an alert's firing was sent (queued for its route's targets); NULL while a silence
-- holds it back. An alert notified before a silence keeps its incident up to date (its
-- acknowledgement and resolution, Alertmanager's re-sends) after a silence marks it.
-- Earlier alerts were notified unless a silence held them when they fired.
ALTER TABLE alerts ADD COLUMN notified_at BIGINT;
UPDATE alerts SET notified_at = fired_at WHERE silenced_by IS NULL;
-- How many items (runs, approvals, escalations) were behind the alert before its list was
-- cut to 50; NULL: all are listed.
ALTER TABLE alerts ADD COLUMN items_total BIGINT;

-- An alert's timeline: fired, refreshed (what it counts changed; at most every 5 min),
-- acknowledged, silenced, notified after a silence, resolved. Earlier alerts get theirs
-- from their columns.
CREATE TABLE alert_events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    alert_id TEXT   NOT NULL,
    at       BIGINT NOT NULL,
    kind     TEXT   NOT NULL,
    actor    TEXT,
    detail   TEXT
);
CREATE INDEX alert_events_alert ON alert_events (alert_id, id);
INSERT INTO alert_events (alert_id, at, kind, detail) SELECT id, fired_at, 'fired', title FROM alerts;
INSERT INTO alert_events (alert_id, at, kind, actor)
    SELECT id, acknowledged_at, 'acknowledged', acknowledged_by FROM alerts WHERE acknowledged_at IS NOT NULL;
INSERT INTO alert_events (alert_id, at, kind) SELECT id, resolved_at, 'resolved' FROM alerts WHERE resolved_at IS NOT NULL;

-- An alert's deliveries, for its page (the order key of an alert's events is its id).
CREATE INDEX webhook_deliveries_alert ON webhook_deliveries (order_key, id) WHERE order_key IS NOT NULL;

-- The model most of a run's steps used (NULL: none named, or last written before this
-- migration), kept by the write path: /trends charts cost by model and its bars open the
-- run list filtered by it. No index: the list reads it inside a time range.
ALTER TABLE runs ADD COLUMN model TEXT;
