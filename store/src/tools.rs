//! Every tool ingest has seen (`tools`, kept by the write path), with how many runs
//! called it (kept beside it by the write path and retention), for the admin's tools page.

use super::sql::{Sql, Tx};
use super::{Db, StoreResult};

/// One tool as stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct SeenTool {
    pub tool_name: String,
    pub calls: i64,
    pub runs: i64,
    pub first_seen_ns: i64,
    pub last_seen_ns: i64,
    pub declared_class: Option<String>,
    pub read_only_hint: Option<bool>,
    pub destructive_hint: Option<bool>,
}

/// The most recently seen tools first, at most `limit`.
pub async fn list(db: &Db, limit: i64) -> StoreResult<Vec<SeenTool>> {
    let sql = "SELECT t.tool_name, t.calls, t.runs, t.first_seen_ns, t.last_seen_ns, t.declared_class, t.read_only_hint, t.destructive_hint \
               FROM tools t ORDER BY t.last_seen_ns DESC, t.tool_name LIMIT $1";
    Ok(db.fetch_all(Sql::with_args(sql, vec![limit.into()])).await?)
}

/// Adds each delta to its tool's run count, in name order, as the catalogue's upsert and
/// retention take the `tools` rows. (After a trace move these updates follow that upsert,
/// so two PostgreSQL writers could wait on each other; PostgreSQL then aborts one, and the
/// ingest writer commits its batch again (the server's `otlp::writer`). Moves are rare.)
pub async fn adjust_runs<'a>(tx: &mut Tx, deltas: impl Iterator<Item = (&'a String, &'a i64)>) -> StoreResult<()> {
    for (name, delta) in deltas.filter(|(_, d)| **d != 0) {
        let mut sql = Sql::new("UPDATE tools SET runs = runs + $1 WHERE tool_name = $2");
        sql.arg(*delta);
        sql.arg(name.as_str());
        tx.execute(sql).await?;
    }
    Ok(())
}
