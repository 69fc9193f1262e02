-- Every page fast at a million spans (issue 27). The run list's flag filters walked every
-- run newest first looking for flagged ones (280 ms at 150,000 runs when none was
-- flagged); a partial index holds only the flagged runs, in the list's order, with the
-- reason the per-reason counts need. The resolved escalations are listed newest first
-- from an index instead of sorting them all.
CREATE INDEX runs_flag_violations ON runs (started_ns, run_id, terminal_reason) WHERE approval_violations > 0;
CREATE INDEX runs_flag_no_read ON runs (started_ns, run_id, terminal_reason) WHERE completed_without_read = TRUE;
CREATE INDEX runs_flag_duplicates ON runs (started_ns, run_id, terminal_reason) WHERE duplicate_side_effects > 0;
CREATE INDEX escalations_status_resolved ON escalations (status, resolved_at, id);
