-- The trends' per-bucket rows are updated by every write that counts into them (issue
-- 44). With full pages an update cannot stay on its row's page: the new version goes to
-- whichever page has room, with a new index entry, so over a day of ingest a bucket's
-- rows scatter over a table many times their size, and reading a week's buckets visits
-- page after page. With room left on each page PostgreSQL updates a row in place (a HOT
-- update, no new index entry), and a bucket's rows stay together on the pages they were
-- inserted on. Pages written from now on keep the room.
ALTER TABLE trend_runs SET (fillfactor = 70);
ALTER TABLE trend_values SET (fillfactor = 70);
ALTER TABLE trend_events SET (fillfactor = 70);
