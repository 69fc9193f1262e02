-- Tool names are searched through `run_tools` since it was added; this index on every
-- tool-call span was only written, never read, and each ingested tool span paid for it.
DROP INDEX IF EXISTS spans_tool_name;
