-- Guarded calls answered already_done, per UTC hour and tool (issue 24): the trends page
-- charts the dedupes the ledger made per day. An entry keeps only its running total
-- (call_ledger.deduped), which cannot say when each dedupe happened; one row per hour and
-- tool stays small however many calls are deduped.

CREATE TABLE call_ledger_hours (
    hour_ms  BIGINT  NOT NULL,
    tool     TEXT    NOT NULL,
    deduped  BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (hour_ms, tool)
);
