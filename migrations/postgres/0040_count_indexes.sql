-- Indexes that let the console's lists and their counts read an index alone (issue 44).

-- Runs with duplicate side effects, now with their terminal reason: the run list's
-- counts for "duplicates" read it without visiting each run's row, and the sort by
-- duplicates reads it as before (duplicate count, then run id).
DROP INDEX runs_duplicates_some;
CREATE INDEX runs_duplicates_some ON runs (duplicate_side_effects, run_id, terminal_reason)
    WHERE duplicate_side_effects > 0;

-- The agents of open (or resolved) escalations, for the queue's agent filter: one seek
-- per agent instead of a visit to every open escalation.
CREATE INDEX escalations_status_agent ON escalations (status, agent);

-- Runs with approval violations, with the count itself: SQLite takes a partial index's
-- `> 0` condition as satisfied only when the column is in the index, so without it the
-- run list's counts for "approval violations" visited every such run's row.
DROP INDEX runs_flag_violations;
CREATE INDEX runs_flag_violations ON runs (started_ns, run_id, terminal_reason, approval_violations)
    WHERE approval_violations > 0;
