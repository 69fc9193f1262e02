-- Lists read in their own order from an index and stop at their page (issue 44; the
-- plans are checked by server/tests/page_plans.rs).

-- The decided approvals, newest decision first: every status but pending has its
-- decided_at, so the history walks this index instead of sorting every decision.
CREATE INDEX approvals_decided_newest ON approvals (decided_at DESC, id) WHERE status <> 'pending';

-- The audit log filtered by action, newest first: a range of this index instead of
-- walking the whole log for the few entries of a rare action.
CREATE INDEX audit_log_action_id ON audit_log (action, id);
