-- How many runs called each tool, kept in `tools` by the write path (a run's first span
-- of a tool adds one, retention and a trace moving away take it back), so the admin's
-- tools page reads one row per tool instead of counting `run_tools` on every view (65 ms
-- p95 on PostgreSQL at 150,000 runs). Filled once here from what is stored.
ALTER TABLE tools ADD COLUMN runs BIGINT NOT NULL DEFAULT 0;
UPDATE tools SET runs = (SELECT COUNT(*) FROM run_tools rt WHERE rt.tool_name = tools.tool_name);
