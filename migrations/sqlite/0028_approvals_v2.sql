-- Approvals v2 (issue 25): edit before approving, rules on arguments tried on history and
-- run in shadow, two people for the dangerous calls, expiry that escalates, Slack.

-- A request approved with changes keeps what the agent asked for beside what was
-- approved: `arguments` and both hashes then hold the approved payload.
ALTER TABLE approvals ADD COLUMN original_arguments TEXT;
ALTER TABLE approvals ADD COLUMN original_payload_sha256 TEXT;
-- The readable diff from the original arguments to the approved ones.
ALTER TABLE approvals ADD COLUMN changes TEXT;
-- A message from the approver back to the agent (with a denial or an edit).
ALTER TABLE approvals ADD COLUMN respond TEXT;
-- How many distinct people must approve the same hash.
ALTER TABLE approvals ADD COLUMN required_approvals BIGINT NOT NULL DEFAULT 1;
-- deny | escalate: what happens when nobody decides in time.
ALTER TABLE approvals ADD COLUMN on_expiry TEXT NOT NULL DEFAULT 'deny';
ALTER TABLE approvals ADD COLUMN escalation_id TEXT;
-- The rule that decided the request or set what it needs.
ALTER TABLE approvals ADD COLUMN rule_name TEXT;
-- What rules read besides the arguments, as it was when the request was filed (JSON:
-- agent, run cost, hour, weekday), so "try on history" sees what a live rule would have.
ALTER TABLE approvals ADD COLUMN rule_input TEXT;

-- One approval per person and payload: two-person requests count distinct users who
-- approved the current hash; the key makes a second click by the same person a no-op.
CREATE TABLE approval_votes (
    approval_id    TEXT   NOT NULL,
    username       TEXT   NOT NULL,
    payload_sha256 TEXT   NOT NULL,
    at             BIGINT NOT NULL,
    PRIMARY KEY (approval_id, username, payload_sha256)
);

ALTER TABLE tool_policies ADD COLUMN arguments_schema TEXT;
ALTER TABLE tool_policies ADD COLUMN on_expiry TEXT NOT NULL DEFAULT 'deny';

-- Ordered rules on a tool policy's calls: `when <CEL expression> -> action`.
CREATE TABLE approval_rules (
    name         TEXT    PRIMARY KEY,
    tool_pattern TEXT    NOT NULL,
    position     BIGINT  NOT NULL,
    expression   TEXT    NOT NULL,
    -- auto_approve | require_approval | deny
    action       TEXT    NOT NULL,
    approvers    BIGINT  NOT NULL DEFAULT 1,
    role         TEXT,
    reason       TEXT,
    -- off | shadow | enforce
    mode         TEXT    NOT NULL,
    updated_by   TEXT,
    updated_at   BIGINT  NOT NULL
);
CREATE INDEX approval_rules_pattern ON approval_rules (tool_pattern, position);

-- What a shadow-mode rule would have done with each request filed while it ran.
CREATE TABLE approval_rule_shadow (
    rule_name   TEXT   NOT NULL,
    approval_id TEXT   NOT NULL,
    -- auto_approve | require_approval | deny | no_match | error
    would       TEXT   NOT NULL,
    at          BIGINT NOT NULL,
    PRIMARY KEY (rule_name, approval_id)
);

-- Slack users linked to Flightdeck users by an administrator.
CREATE TABLE slack_users (
    slack_user_id TEXT   PRIMARY KEY,
    username      TEXT   NOT NULL,
    linked_by     TEXT   NOT NULL,
    linked_at     BIGINT NOT NULL
);
-- Signatures of Slack requests already handled, so a replayed request is refused.
CREATE TABLE slack_seen (
    signature TEXT   PRIMARY KEY,
    at        BIGINT NOT NULL
);
