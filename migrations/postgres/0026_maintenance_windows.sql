-- Maintenance windows (issue 26): a silence on a weekly schedule, active only inside its
-- hours (UTC) on its days until it ends. NULL weekdays: a plain silence.

ALTER TABLE alert_silences ADD COLUMN weekdays TEXT;
ALTER TABLE alert_silences ADD COLUMN from_minute BIGINT;
ALTER TABLE alert_silences ADD COLUMN to_minute BIGINT;
