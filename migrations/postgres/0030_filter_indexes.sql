-- The run list filtered by trigger or agent (issue 27): at 150,000 runs each took 200 ms
-- on SQLite, nearly all of it the per-reason counts testing every run. A trigger's runs
-- are one range of this index, in the list's order and with their reason; an agent's runs
-- (the filter's names are resolved first) one range of the second.
CREATE INDEX runs_trigger_started ON runs (run_trigger, started_ns, run_id, terminal_reason);
CREATE INDEX runs_agent_reason ON runs (agent, terminal_reason);
