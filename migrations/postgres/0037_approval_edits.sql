-- Every edit an approver made to a request's arguments before approving, in order, with
-- who made it: the second approver of a two-person request sees what the first changed,
-- and the decided history names each change and each approver.
CREATE TABLE approval_edits (
    approval_id    TEXT   NOT NULL,
    seq            BIGINT NOT NULL,
    username       TEXT   NOT NULL,
    at             BIGINT NOT NULL,
    -- The arguments after this edit (canonical JSON) and their payload hash.
    arguments      TEXT   NOT NULL,
    payload_sha256 TEXT   NOT NULL,
    -- The readable diff from the arguments before this edit.
    changes        TEXT   NOT NULL,
    PRIMARY KEY (approval_id, seq)
);
