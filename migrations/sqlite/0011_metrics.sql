-- What `/metrics` reads on every scrape, without visiting every run or span: the sums of
-- deduplicated calls and duplicate side effects read partial indexes that hold only the
-- runs where they are non-zero (most runs have none), and the cost quantiles of runs
-- that ended recently read a range of (ended_ns, cost) without touching the rows.
-- Running runs have no ended_ns and stay out of the range.
CREATE INDEX runs_deduped_calls ON runs (deduped_calls) WHERE deduped_calls > 0;
CREATE INDEX runs_duplicate_side_effects ON runs (duplicate_side_effects) WHERE duplicate_side_effects > 0;
CREATE INDEX runs_ended_cost ON runs (ended_ns, cost);
-- Irreversible executions per tool and outcome, read from the index alone. The partial
-- index on spans (end_ns) for irreversible spans serves time ranges; counting through it
-- fetched every irreversible span row (0.5 s for 100,000 on PostgreSQL), this one holds
-- the two columns the count needs (30 ms) and, like it, only irreversible spans.
CREATE INDEX spans_irreversible_tool_outcome ON spans (tool_name, outcome) WHERE side_effect = 'irreversible';
