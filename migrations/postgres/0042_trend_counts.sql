-- Counts the trends page and the alert rules read without visiting every row (issue 44).

-- The tool calls of each bucket's runs, running ones included: the alert rule
-- for a spike in deduplicated calls compares them with the day before from the rollups
-- instead of reading every run of that day. The next start adds the rollups up again
-- from the runs (`store::trends::build_rollups_if_new`), which fills the new column.
ALTER TABLE trend_runs ADD COLUMN tool_calls BIGINT NOT NULL DEFAULT 0;
DELETE FROM trend_rollups_built;

-- Approval decisions per bucket by status (the trends' approvals chart): a range of this
-- index for each status counted.
CREATE INDEX approvals_status_decided ON approvals (status, decided_at) WHERE decided_at IS NOT NULL;

-- Open escalations nobody has claimed, by when they were needed: the alert rule for the
-- escalation backlog counts the late ones here instead of reading the whole queue.
CREATE INDEX escalations_open_unclaimed ON escalations (needed_at, id) WHERE status = 'open' AND claimed_by IS NULL;
