-- Trends: each chart reads one time range of one table. Runs are read by `runs_started`
-- (0002); a covering index on runs was measured (100,000 runs, 30 days) and saved nothing
-- on either backend while costing every ingest recompute, so there is none. The existing
-- escalation and approval indexes lead with status; these lead with time.
CREATE INDEX escalations_opened ON escalations (opened_at);
CREATE INDEX escalations_resolved ON escalations (resolved_at) WHERE resolved_at IS NOT NULL;
CREATE INDEX approvals_created ON approvals (created_at);
