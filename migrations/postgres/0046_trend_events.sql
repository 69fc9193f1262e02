-- How many escalations and approvals changed state in each trends bucket (issue 44): the
-- page read them by counting index entries per bucket, which grew with a busy month's
-- hundreds of thousands of escalations. The stores that open, resolve, file, decide and
-- expire them now add to these rows in the same transaction (`store::trends::count_events`;
-- the kinds are `domain::trends::events::EventKind`), for each bucket size the page draws,
-- for every agent (scope '') and for each agent.
CREATE TABLE trend_events (
    period_ms BIGINT NOT NULL,
    scope TEXT NOT NULL,
    kind TEXT NOT NULL,
    start_ms BIGINT NOT NULL,
    events BIGINT NOT NULL,
    PRIMARY KEY (period_ms, scope, kind, start_ms)
);

-- The counts of what is already stored, as the page counted them: an expired request
-- has `decided_at = expires_at`; a cancelled one is neither decided nor expired.
WITH happened (kind, agent, at) AS (
    SELECT 'escalation_opened', agent, opened_at FROM escalations
    UNION ALL SELECT 'escalation_resolved', agent, resolved_at FROM escalations WHERE resolved_at IS NOT NULL
    UNION ALL SELECT 'approval_requested', agent, created_at FROM approvals
    UNION ALL SELECT 'approval_decided', agent, decided_at FROM approvals
        WHERE decided_at IS NOT NULL AND status IN ('approved', 'approved_with_changes', 'denied')
    UNION ALL SELECT 'approval_expired', agent, decided_at FROM approvals
        WHERE decided_at IS NOT NULL AND status = 'expired'
),
scoped (kind, scope, at) AS (
    SELECT kind, '', at FROM happened
    UNION ALL SELECT kind, agent, at FROM happened WHERE agent IS NOT NULL AND agent <> ''
),
periods (period_ms) AS (
    SELECT 3600000 UNION ALL SELECT 21600000 UNION ALL SELECT 86400000
)
INSERT INTO trend_events (period_ms, scope, kind, start_ms, events)
SELECT p.period_ms, s.scope, s.kind, (s.at / p.period_ms) * p.period_ms, COUNT(*)
FROM scoped s CROSS JOIN periods p
GROUP BY p.period_ms, s.scope, s.kind, (s.at / p.period_ms) * p.period_ms;
