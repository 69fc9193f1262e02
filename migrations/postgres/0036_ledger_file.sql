-- Nothing changes on PostgreSQL, where the execution ledger stays in the database (its
-- writers lock rows, not the database). SQLite's 0036 moved its ledger into a file of its
-- own; this one keeps the two backends' migration numbers in step.

SELECT 1;
