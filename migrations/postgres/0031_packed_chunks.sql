-- Span and body chunks stored zstd-compressed (issue 27): the chunk's JSON text goes to
-- `packed` and `records` / `bodies` hold ''. Rows written before keep their text and no
-- `packed`; readers take whichever the row has (storage/packing.rs).
ALTER TABLE span_chunks ADD COLUMN packed BYTEA;
ALTER TABLE body_chunks ADD COLUMN packed BYTEA;
