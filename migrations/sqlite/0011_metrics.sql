-- What `/metrics` reads on every scrape, without visiting every run: the sums of
-- deduplicated calls and duplicate side effects read partial indexes that hold only the
-- runs where they are non-zero (most runs have none), and the cost quantiles of runs
-- that ended recently read a range of (ended_ns, cost) without touching the rows.
-- Running runs have no ended_ns and stay out of the range.
CREATE INDEX runs_deduped_calls ON runs (deduped_calls) WHERE deduped_calls > 0;
CREATE INDEX runs_duplicate_side_effects ON runs (duplicate_side_effects) WHERE duplicate_side_effects > 0;
CREATE INDEX runs_ended_cost ON runs (ended_ns, cost);
