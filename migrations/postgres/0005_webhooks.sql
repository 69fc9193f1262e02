-- Outgoing webhooks: a durable outbox, one row per (event, target) so each target is
-- retried on its own. A row is written in the same database as the thing it announces and
-- sent later by a worker; with several instances a worker holds a row only while its lease
-- (`lease`, `claimed_until`) lasts. The target's URL and format are copied in so a
-- delivery survives its target being edited out of the config. Times are Unix ms.
CREATE TABLE webhook_deliveries (
    id              BIGSERIAL PRIMARY KEY,
    event_kind      TEXT    NOT NULL,
    -- the notify::Event as JSON; rendered in `format` when sent
    event           TEXT    NOT NULL,
    target_name     TEXT    NOT NULL,
    target_url      TEXT    NOT NULL,
    format          TEXT    NOT NULL,
    -- pending | delivered | failed
    status          TEXT    NOT NULL DEFAULT 'pending',
    attempts        BIGINT  NOT NULL DEFAULT 0,
    next_attempt_at BIGINT  NOT NULL,
    lease           TEXT,
    claimed_until   BIGINT,
    last_status     BIGINT,
    last_error      TEXT,
    created_at      BIGINT  NOT NULL,
    delivered_at    BIGINT
);

-- the worker's query: pending rows that are due
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
-- the admin page: newest first, optionally failures only
CREATE INDEX webhook_deliveries_status ON webhook_deliveries (status, id);
