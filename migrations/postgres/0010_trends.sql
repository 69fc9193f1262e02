-- Trends: every chart reads one time range of one table. The runs index covers the
-- columns the page reads (INCLUDE), so a 30-day window of 100,000 runs can be an
-- index-only scan instead of a read of the wide run rows.
CREATE INDEX runs_trends ON runs (started_ns) INCLUDE (terminal_reason, cost, tool_calls, deduped_calls,
    duplicate_side_effects, completed_without_read);
-- The existing escalation and approval indexes lead with status; these lead with time.
CREATE INDEX escalations_opened ON escalations (opened_at);
CREATE INDEX escalations_resolved ON escalations (resolved_at) WHERE resolved_at IS NOT NULL;
CREATE INDEX approvals_created ON approvals (created_at);
