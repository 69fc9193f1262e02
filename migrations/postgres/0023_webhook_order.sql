-- Deliveries that must arrive in order (issue 26): an alert's firing, acknowledged and
-- resolved events to one target share an order key (the alert's id), and a delivery is
-- only sent once every earlier one with its target and key has been delivered or has
-- failed for good. PagerDuty ties the three to one incident; a resolve overtaking its
-- trigger would leave the incident open. NULL: no order to keep.

ALTER TABLE webhook_deliveries ADD COLUMN order_key TEXT;
CREATE INDEX webhook_deliveries_order ON webhook_deliveries (target_name, order_key, id) WHERE status = 'pending';
