-- Spans are stored as chunks: one row per run per write, holding that write's new spans
-- of the run as a JSON array of objects (keys as the former `spans` columns, see
-- app/src/storage/span_record.rs). One row and one index entry per run per write instead
-- of a row and up to six random-key index entries per span, which bounded ingest.
-- Span-level lookups that need an index get small tables written only for the spans
-- that have something to look up.

CREATE TABLE span_chunks (
    id          BIGSERIAL PRIMARY KEY,
    run_id      TEXT    NOT NULL,
    -- how many spans `records` holds
    spans       BIGINT  NOT NULL,
    received_at BIGINT  NOT NULL,
    records     TEXT    NOT NULL
);
CREATE INDEX span_chunks_run ON span_chunks (run_id, id);

-- Run search by idempotency key or external resource id: each distinct term once per run.
CREATE TABLE run_terms (
    term   TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (term, run_id)
);

-- Irreversible tool calls (about 1 % of spans): the alert rule reads recent ones by end
-- time, /metrics counts them per tool and outcome.
CREATE TABLE irreversible_calls (
    trace_id  TEXT   NOT NULL,
    span_id   TEXT   NOT NULL,
    run_id    TEXT   NOT NULL,
    tool_name TEXT,
    outcome   TEXT,
    end_ns    BIGINT NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX irreversible_calls_end ON irreversible_calls (end_ns);
CREATE INDEX irreversible_calls_tool_outcome ON irreversible_calls (tool_name, outcome);
CREATE INDEX irreversible_calls_run ON irreversible_calls (run_id);

-- Existing spans move over, one chunk per run.
INSERT INTO span_chunks (run_id, spans, received_at, records)
SELECT run_id, COUNT(*), MAX(received_at), json_agg(json_build_object(
    'trace_id', trace_id, 'span_id', span_id, 'parent_span_id', parent_span_id, 'name', name, 'kind', kind,
    'start_ns', start_ns, 'end_ns', end_ns, 'status_code', status_code, 'status_message', status_message,
    'agent', agent, 'trigger', run_trigger, 'terminal_reason', terminal_reason,
    'escalation_reason', escalation_reason, 'cost', cost, 'wall_clock_ms', wall_clock_ms, 'role', role,
    'step_index', step_index, 'stop_reason', stop_reason, 'model_id', model_id, 'input_tokens', input_tokens,
    'output_tokens', output_tokens, 'cache_tokens', cache_tokens, 'tool_name', tool_name,
    'side_effect', side_effect, 'idempotency_key', idempotency_key, 'attempt', attempt, 'outcome', outcome,
    'latency_ms', latency_ms, 'external_id', external_id, 'args_sha256', args_sha256,
    'approval_id', approval_id, 'attributes', attributes::json, 'events', events::json,
    'resource', resource::json))::text
FROM spans GROUP BY run_id;

INSERT INTO run_terms (term, run_id)
SELECT idempotency_key, run_id FROM spans WHERE idempotency_key IS NOT NULL
UNION SELECT external_id, run_id FROM spans WHERE external_id IS NOT NULL;

INSERT INTO irreversible_calls (trace_id, span_id, run_id, tool_name, outcome, end_ns)
SELECT trace_id, span_id, run_id, tool_name, outcome, end_ns FROM spans WHERE side_effect = 'irreversible';

DROP TABLE spans;
