-- The execution ledger moved to a SQLite file of its own (`flightdeck.ledger.db`, see
-- migrations/sqlite-ledger and docs/adr/0011-ledger-file.md). `Db::migrate` copies the
-- entries and hourly counts into that file before this migration runs; here the main
-- file's copies go.

DROP TABLE call_ledger;
DROP TABLE call_ledger_hours;
