-- The rows of a run's spans partitioned by the day the run arrived (ADR 0016), so
-- retention drops a day's partitions instead of deleting its rows one by one.
--
-- A run that first arrives on day d (days since 1970-01-01 UTC) is numbered
-- (d << 40) + the next value of runs_run_no_seq, and day d's partition of each table
-- holds the numbers [d << 40, (d + 1) << 40). store::partitions makes each day's
-- partitions and lists the day in run_no_days. Every number given before this
-- migration is below 1 << 40 and stays in each table's `_early` partition, which keeps
-- the table's rows as they are: span_chunks, body_chunks and run_tools are attached, not
-- copied; run_terms gains the run's number and is copied once.

-- The days that have partitions; a new run takes the latest that is not after today.
CREATE TABLE run_no_days (
    day        BIGINT PRIMARY KEY,
    created_at BIGINT NOT NULL
);

-- span_chunks
ALTER TABLE span_chunks RENAME TO span_chunks_early;
ALTER INDEX span_chunks_run_no RENAME TO span_chunks_early_run_no;
ALTER TABLE span_chunks_early RENAME CONSTRAINT span_chunks_pkey TO span_chunks_early_pkey;
ALTER TABLE span_chunks_early ALTER COLUMN run_no SET NOT NULL;
CREATE TABLE span_chunks (LIKE span_chunks_early INCLUDING DEFAULTS) PARTITION BY RANGE (run_no);
ALTER SEQUENCE span_chunks_id_seq OWNED BY span_chunks.id;
ALTER TABLE span_chunks ATTACH PARTITION span_chunks_early FOR VALUES FROM (MINVALUE) TO (1099511627776);
CREATE INDEX span_chunks_run_no ON span_chunks (run_no, id);

-- body_chunks
ALTER TABLE body_chunks RENAME TO body_chunks_early;
ALTER INDEX body_chunks_run_no RENAME TO body_chunks_early_run_no;
ALTER TABLE body_chunks_early RENAME CONSTRAINT body_chunks_pkey TO body_chunks_early_pkey;
ALTER TABLE body_chunks_early ALTER COLUMN run_no SET NOT NULL;
CREATE TABLE body_chunks (LIKE body_chunks_early INCLUDING DEFAULTS) PARTITION BY RANGE (run_no);
ALTER SEQUENCE body_chunks_id_seq OWNED BY body_chunks.id;
ALTER TABLE body_chunks ATTACH PARTITION body_chunks_early FOR VALUES FROM (MINVALUE) TO (1099511627776);
CREATE INDEX body_chunks_run_no ON body_chunks (run_no, id);

-- run_tools: its key already starts with the run's number.
ALTER TABLE run_tools RENAME TO run_tools_early;
ALTER INDEX run_tools_search RENAME TO run_tools_early_search;
ALTER TABLE run_tools_early RENAME CONSTRAINT run_tools_pkey TO run_tools_early_pkey;
CREATE TABLE run_tools (LIKE run_tools_early INCLUDING DEFAULTS) PARTITION BY RANGE (run_no);
ALTER TABLE run_tools ADD PRIMARY KEY (run_no, tool_name);
ALTER TABLE run_tools ATTACH PARTITION run_tools_early FOR VALUES FROM (MINVALUE) TO (1099511627776);
CREATE INDEX run_tools_search ON run_tools (tool_name, started_ns, run_id, terminal_reason);

-- run_terms: one row per (term, run) as before, now with the run's number; terms of runs
-- already deleted are left behind.
CREATE TABLE run_terms_by_day (
    term   TEXT   NOT NULL,
    run_id TEXT   NOT NULL,
    run_no BIGINT NOT NULL,
    PRIMARY KEY (term, run_id, run_no)
) PARTITION BY RANGE (run_no);
CREATE TABLE run_terms_early PARTITION OF run_terms_by_day FOR VALUES FROM (MINVALUE) TO (1099511627776);
INSERT INTO run_terms_by_day (term, run_id, run_no)
SELECT t.term, t.run_id, r.run_no FROM run_terms t JOIN runs r ON r.run_id = t.run_id;
DROP TABLE run_terms;
ALTER TABLE run_terms_by_day RENAME TO run_terms;
ALTER TABLE run_terms RENAME CONSTRAINT run_terms_by_day_pkey TO run_terms_pkey;
