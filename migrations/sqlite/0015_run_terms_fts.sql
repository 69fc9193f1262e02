-- Run search terms (idempotency keys, external resource ids) move from the `run_terms`
-- table into an FTS5 index: one document per span chunk (rowid = span_chunks.id), each
-- term one token, the upper-case hex of its bytes (see app/src/storage/terms.rs for why).
-- A B-tree keyed by random terms rewrote about a page per term on every ingest commit.
-- Contentless (the terms are in the chunks already), with deletes by rowid, and
-- detail=none: a search only needs which documents hold a token.
CREATE VIRTUAL TABLE run_terms_fts USING fts5(
    terms,
    content = '',
    contentless_delete = 1,
    detail = none,
    tokenize = 'ascii'
);

-- Existing terms go into the document of their run's first chunk.
INSERT INTO run_terms_fts (rowid, terms)
SELECT c.first_chunk, group_concat(hex(t.term), ' ')
FROM run_terms t
JOIN (SELECT run_id, MIN(id) AS first_chunk FROM span_chunks GROUP BY run_id) c ON c.run_id = t.run_id
GROUP BY c.first_chunk;

DROP TABLE run_terms;
