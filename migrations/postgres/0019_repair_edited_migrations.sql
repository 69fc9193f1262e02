-- Repairs databases that applied 0010 in its released text, before it was edited (the
-- edit removed the covering index `runs_trends`, measured to save nothing while costing
-- every ingest recompute). Such databases are accepted at start with their earlier
-- checksum (storage::migrations::EDITED_AFTER_RELEASE); this brings their schema to
-- today's. 0011's released text lacked an index on `spans`, a table 0013 dropped, and
-- 0016's edit changed only a comment, so neither needs a repair.
DROP INDEX IF EXISTS runs_trends;
