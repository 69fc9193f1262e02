//! Model prices set on the admin page (`model_prices`); they override the config file and
//! the shipped table (`pricing`).

use super::sql::Sql;
use super::{now_ms, Db, StoreResult};
use chrono::NaiveDate;
use domain::pricing::{ModelPrice, PriceSource};

#[derive(sqlx::FromRow)]
struct PriceRow {
    pattern: String,
    valid_from: String,
    input: f64,
    output: f64,
    cache_read: Option<f64>,
    cache_write: Option<f64>,
    reasoning: Option<f64>,
}

/// Every admin price, by pattern and date.
pub async fn list(db: &Db) -> StoreResult<Vec<ModelPrice>> {
    let sql = "SELECT pattern, valid_from, input, output, cache_read, cache_write, reasoning \
               FROM model_prices ORDER BY pattern, valid_from";
    let rows: Vec<PriceRow> = db.fetch_all(Sql::new(sql)).await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            Some(ModelPrice {
                valid_from: NaiveDate::parse_from_str(&r.valid_from, "%Y-%m-%d").ok()?,
                pattern: r.pattern,
                input: r.input,
                output: r.output,
                cache_read: r.cache_read,
                cache_write: r.cache_write,
                reasoning: r.reasoning,
                source: PriceSource::Admin,
            })
        })
        .collect())
}

/// Creates or replaces the admin price for (pattern, valid_from).
pub async fn upsert(db: &Db, p: &ModelPrice) -> StoreResult<()> {
    let sql = "INSERT INTO model_prices (pattern, valid_from, input, output, cache_read, cache_write, reasoning, updated_at) \
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
               ON CONFLICT (pattern, valid_from) DO UPDATE SET input = excluded.input, output = excluded.output, \
               cache_read = excluded.cache_read, cache_write = excluded.cache_write, reasoning = excluded.reasoning, \
               updated_at = excluded.updated_at";
    db.execute(Sql::with_args(
        sql,
        vec![
            (&p.pattern).into(),
            p.valid_from.format("%Y-%m-%d").to_string().into(),
            p.input.into(),
            p.output.into(),
            p.cache_read.into(),
            p.cache_write.into(),
            p.reasoning.into(),
            now_ms().into(),
        ],
    ))
    .await
    .map(|_| ())?;
    Ok(())
}

/// Removes one admin price; the config or shipped price for the model applies again.
pub async fn delete(db: &Db, pattern: &str, valid_from: NaiveDate) -> StoreResult<bool> {
    let sql = "DELETE FROM model_prices WHERE pattern = $1 AND valid_from = $2";
    let day = valid_from.format("%Y-%m-%d").to_string();
    let n = db.execute(Sql::with_args(sql, vec![pattern.into(), (&day).into()])).await?;
    Ok(n > 0)
}
