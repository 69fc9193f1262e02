-- A run-list filter no one index answers reads a window of its lead's newest runs (ADR
-- 0022). When the lead is a flag, the counts beside the list tested the other conditions
-- (an agent, a trigger, a model, another flag) on each of the window's 2,500 runs, a heap
-- page each: 2,500 page reads, 37-68 ms at 10 million spans when they were not cached.
-- With those columns in the flag's own index the counts read the index alone (about 100
-- pages) wherever the visibility map says the rows are visible to all. The list still
-- reads the rows it shows. Only flagged runs are in these indexes, so the ingest writer
-- writes the wider entries for those alone. SQLite reads these pages well within its
-- target and keeps its indexes.
DROP INDEX runs_flag_duplicates;
DROP INDEX runs_flag_no_read;
DROP INDEX runs_flag_violations;
-- `runs_early` kept its own copies when 0048 attached it; they go with the parents above
-- if they were attached, and here if not.
DROP INDEX IF EXISTS runs_early_flag_duplicates;
DROP INDEX IF EXISTS runs_early_flag_no_read;
DROP INDEX IF EXISTS runs_early_flag_violations;
CREATE INDEX runs_flag_duplicates ON runs (started_ns, run_id, terminal_reason)
    INCLUDE (agent, run_trigger, model, duplicate_side_effects, completed_without_read, approval_violations)
    WHERE duplicate_side_effects > 0;
CREATE INDEX runs_flag_no_read ON runs (started_ns, run_id, terminal_reason)
    INCLUDE (agent, run_trigger, model, duplicate_side_effects, completed_without_read, approval_violations)
    WHERE completed_without_read = TRUE;
CREATE INDEX runs_flag_violations ON runs (started_ns, run_id, terminal_reason, approval_violations)
    INCLUDE (agent, run_trigger, model, duplicate_side_effects, completed_without_read)
    WHERE approval_violations > 0;
