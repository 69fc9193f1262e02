-- How many runs of each arrival day called each tool (ADR 0016): the write path and
-- retention keep it beside `tools.runs`, so dropping a day's partitions takes the day's
-- runs out of the tools' run counts by these rows instead of reading its `run_tools`.
CREATE TABLE tool_day_runs (
    day BIGINT NOT NULL,
    tool_name TEXT NOT NULL,
    runs BIGINT NOT NULL,
    PRIMARY KEY (day, tool_name)
);

-- A run's number carries its arrival day in its high bits (run_no >> 40); the runs from
-- before the day partitions (numbers below 2^40) count as day 0, the day that
-- `run_tools_early` holds.
INSERT INTO tool_day_runs (day, tool_name, runs)
SELECT run_no >> 40, tool_name, COUNT(*) FROM run_tools GROUP BY 1, 2;
