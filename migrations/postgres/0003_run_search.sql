-- Finding a run by what an operator has in hand: an idempotency key, an external
-- resource id, or a tool name. Partial indexes: only tool-call spans carry these.
CREATE INDEX spans_idempotency_key ON spans (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX spans_external_id ON spans (external_id) WHERE external_id IS NOT NULL;
CREATE INDEX spans_tool_name ON spans (tool_name) WHERE tool_name IS NOT NULL;
-- Sorting the run list by cost or duration.
CREATE INDEX runs_cost ON runs (cost, run_id);
CREATE INDEX runs_wall_clock ON runs (wall_clock_ms, run_id);
