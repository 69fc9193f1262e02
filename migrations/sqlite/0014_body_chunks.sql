-- Bodies are stored per run per write, like spans (0013): one row and one index entry
-- for all of a run's new bodies in a write, instead of a row and two random-key index
-- entries (trace and span, run) per span, about half of which carry bodies. `bodies`
-- is a JSON array of {"trace_id", "span_id", "bodies"} (see app/src/storage/span_record.rs).

CREATE TABLE body_chunks (
    id     INTEGER PRIMARY KEY,
    run_id TEXT    NOT NULL,
    -- how many spans' bodies `bodies` holds
    spans  INTEGER NOT NULL,
    bodies TEXT    NOT NULL
);

INSERT INTO body_chunks (run_id, spans, bodies)
SELECT run_id, COUNT(*), json_group_array(json_object('trace_id', trace_id, 'span_id', span_id, 'bodies', json(bodies)))
FROM span_bodies GROUP BY run_id;

DROP TABLE span_bodies;

CREATE INDEX body_chunks_run ON body_chunks (run_id);
