-- Severities are named for what they ask of on-call (issue 26): page, ticket, info. The
-- stored alerts and saved rule settings of the two old names move to the new ones.

UPDATE alerts SET severity = 'page' WHERE severity = 'critical';
UPDATE alerts SET severity = 'ticket' WHERE severity = 'warning';
UPDATE alert_rules SET settings = REPLACE(settings, '"severity":"critical"', '"severity":"page"');
UPDATE alert_rules SET settings = REPLACE(settings, '"severity":"warning"', '"severity":"ticket"');
