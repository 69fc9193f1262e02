-- zstd dictionaries trained on the deployment's own span chunks (issue 27, bytes per
-- span; docs/adr/0010-chunk-dictionaries.md). `id` is the id zstd gives the dictionary,
-- which every chunk compressed with it carries in its frame; the newest is the one
-- writers use. Never deleted: a chunk needs its dictionary for as long as it is kept.
CREATE TABLE chunk_dictionaries (
    id BIGINT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    bytes BYTEA NOT NULL
);
