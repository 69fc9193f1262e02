-- The security review (issue 20): accounts can be disabled, and an approval authorizes
-- one call in one run for a short time.

-- A disabled user cannot sign in, and their sessions end (the session epoch is bumped
-- in the same statement that disables them).
ALTER TABLE users ADD COLUMN disabled_at BIGINT;

-- An approval must be used within a window after it was decided: the tool policy's
-- `use_within_seconds` is copied into the request when it is filed (like its side effect
-- and approver role), and `use_by` is set with the decision (decided_at plus that
-- window, 900 s when the policy says nothing); an execution that starts later is a
-- `stale_approval` violation. Requests decided before this migration have no `use_by`,
-- and are held to nothing new.
ALTER TABLE approvals ADD COLUMN use_within_seconds BIGINT;
ALTER TABLE approvals ADD COLUMN use_by BIGINT;
-- The API token that filed the request, by id: only it (or an administrator) may cancel
-- the request, and an execution sent with another token is a `wrong_token` violation.
ALTER TABLE approvals ADD COLUMN requested_by_token BIGINT;
ALTER TABLE tool_policies ADD COLUMN use_within_seconds BIGINT;
