-- The tool of each run's first failed call, kept by the write path ('' when none failed;
-- NULL for runs last written before this migration), and the failed runs by end time:
-- the "failed to recover" alert read every failed run's spans in its window at each
-- evaluation, which under sustained ingest took a quarter of the server's CPU and grew
-- with the window's runs (ingest fell from 28,000 to 15,000 spans/s within 11 minutes).
ALTER TABLE runs ADD COLUMN failed_tool TEXT;
CREATE INDEX runs_failed_ended ON runs (ended_ns) WHERE terminal_reason = 'error';
