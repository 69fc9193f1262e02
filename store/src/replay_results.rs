//! Regression-test results from replay fixtures: recorded (the agent taken from the run
//! when the team did not name it), and read back for the trends page.

use super::sql::Sql;
use super::{from_ms, now_ms, Db, StoreError, StoreResult};
use domain::replay_results::{ReplayResult, ValidResult};

/// Records a result now. `details` are already redacted.
pub async fn record(db: &Db, r: &ValidResult) -> StoreResult<ReplayResult> {
    let agent = match (&r.agent, &r.run_id) {
        (Some(agent), _) => agent.clone(),
        (None, Some(run)) => {
            let sql = Sql::with_args(
                format!("SELECT COALESCE(agent, '') FROM runs WHERE {}", super::partitions::RUN_BY_ID),
                vec![run.as_str().into()],
            );
            let found: Vec<(String,)> = db.fetch_all(sql).await?;
            match found.into_iter().next() {
                Some((agent,)) if !agent.is_empty() => agent,
                _ => {
                    return Err(StoreError::Invalid(format!(
                        "no stored run `{run}` with an agent: name the `agent` under test"
                    )))
                }
            }
        }
        (None, None) => return Err(StoreError::Invalid("name the `agent` under test".into())),
    };
    let (id, now) = (format!("rpl_{:016x}", rand::random::<u64>()), now_ms());
    let details = r.details.as_ref().map(|d| d.to_string());
    let sql = Sql::with_args(
        "INSERT INTO replay_results (id, agent, fixture, run_id, passed, details, recorded_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        vec![
            id.as_str().into(),
            agent.as_str().into(),
            r.fixture.as_str().into(),
            r.run_id.as_deref().into(),
            r.passed.into(),
            details.as_deref().into(),
            now.into(),
        ],
    );
    db.execute(sql).await?;
    Ok(ReplayResult {
        id,
        agent,
        fixture: r.fixture.clone(),
        run_id: r.run_id.clone(),
        passed: r.passed,
        details: r.details.clone(),
        recorded_at: from_ms(now),
    })
}

/// (recorded at, agent, passed) of the results in `[from_ms, to_ms)`, for the trends.
pub async fn in_window(db: &Db, from_ms: i64, to_ms: i64) -> StoreResult<Vec<(i64, String, bool)>> {
    let sql = Sql::with_args(
        "SELECT recorded_at, agent, passed FROM replay_results WHERE recorded_at >= $1 AND recorded_at < $2",
        vec![from_ms.into(), to_ms.into()],
    );
    Ok(db.fetch_all(sql).await?)
}
