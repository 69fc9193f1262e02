-- The tools each run called, one row per (run, tool), with the run's start and terminal
-- reason copied from `runs`. The ingest write path keeps the copies equal to `runs` (it
-- rewrites a run's rows whenever it recomputes the run), so a search by tool name walks
-- one index newest first and stops after a page, and counts per reason read the same
-- index, instead of visiting every span of a tool that most runs call.
CREATE TABLE run_tools (
    run_id          TEXT   NOT NULL,
    tool_name       TEXT   NOT NULL,
    started_ns      BIGINT NOT NULL,
    terminal_reason TEXT   NOT NULL,
    PRIMARY KEY (run_id, tool_name)
);
CREATE INDEX run_tools_search ON run_tools (tool_name, started_ns, run_id, terminal_reason);

INSERT INTO run_tools (run_id, tool_name, started_ns, terminal_reason)
SELECT DISTINCT s.run_id, s.tool_name, r.started_ns, r.terminal_reason
FROM spans s JOIN runs r ON r.run_id = s.run_id
WHERE s.tool_name IS NOT NULL;
