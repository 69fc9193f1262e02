-- How many runs there are per terminal reason, kept by the ingest write path (and
-- retention) in the same transaction that changes `runs`, so the unfiltered run list
-- reads five rows instead of counting every run.
CREATE TABLE run_reason_counts (
    terminal_reason TEXT   PRIMARY KEY,
    runs            BIGINT NOT NULL
);

INSERT INTO run_reason_counts (terminal_reason, runs)
SELECT terminal_reason, COUNT(*) FROM runs GROUP BY terminal_reason;
