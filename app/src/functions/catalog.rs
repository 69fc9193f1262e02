//! What derivation knows besides the spans, for admins: every tool seen and its class
//! (classified in one click, which creates the policy), and the model prices. A change
//! to either recomputes the stored runs it affects, in the background and in batches.

use crate::errors::AppError;
use domain::models::{PricesPage, ToolRow};
use leptos::prelude::*;

/// Every tool ingest has seen, most recent first, with its class and a suggestion.
#[server(prefix = "/fn", endpoint = "load_tools")]
pub async fn load_tools() -> Result<Vec<ToolRow>, AppError> {
    use super::ssr;
    use domain::canonical::SideEffect;
    use domain::policy::{policy_for, suggest_class};
    use store::{from_ms, tools};
    ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let rules = ssr::state()?.rules.refresh(&db).await?;
    let seen = tools::list(&db, 2000).await?;
    Ok(seen
        .into_iter()
        .map(|t| {
            let policy = policy_for(&t.tool_name, &rules.policies);
            let declared =
                t.declared_class.as_deref().and_then(SideEffect::parse).filter(|c| *c != SideEffect::Unknown);
            let (class, class_from) = match (policy, declared) {
                (Some(p), _) => (Some(p.side_effect), Some(format!("policy {}", p.pattern))),
                (None, Some(c)) => (Some(c), Some("declared by its spans".to_string())),
                (None, None) => (None, None),
            };
            let suggestion =
                class.is_none().then(|| suggest_class(&t.tool_name, t.read_only_hint, t.destructive_hint)).flatten();
            ToolRow {
                name: t.tool_name,
                calls: t.calls,
                runs: t.runs,
                first_seen: from_ms(t.first_seen_ns / 1_000_000),
                last_seen: from_ms(t.last_seen_ns / 1_000_000),
                class,
                class_from,
                suggestion,
            }
        })
        .collect())
}

/// Classifies one tool: creates (or replaces the class of) the policy for its exact name,
/// then recomputes the flags of every stored run that called it.
#[server(prefix = "/fn", endpoint = "classify_tool")]
pub async fn classify_tool(tool: String, side_effect: String) -> Result<(), AppError> {
    use super::ssr;
    use domain::canonical::SideEffect;
    use domain::policy::ToolPolicy;
    use store::audit::action;
    use store::{policies, recompute::Scope};
    let admin = ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let tool = tool.trim().to_string();
    if tool.is_empty() || tool.len() > 200 {
        return ssr::fail(AppError::Invalid("a tool name has 1 to 200 characters".into()));
    }
    let Some(class) = SideEffect::parse(&side_effect).filter(|s| *s != SideEffect::Unknown) else {
        return ssr::fail(AppError::Invalid(format!(
            "choose a class for `{tool}`: none, read, write or irreversible (got `{side_effect}`)"
        )));
    };
    // Keep the approval settings of an existing exact-name policy; only the class changes.
    let policy = match policies::list(&db).await?.into_iter().find(|p| p.pattern == tool) {
        Some(existing) => ToolPolicy { side_effect: class, ..existing },
        None => ToolPolicy::class(&tool, class),
    };
    policies::upsert(&db, &policy).await?;
    ssr::audit(&db, &admin, action::POLICY_SAVED, &tool, Some(&format!("classified as {class} on the tools page")))
        .await?;
    recompute_in_background(
        admin.username.clone(),
        Scope { tools: Some(vec![tool.clone()]), ..Scope::default() },
        format!("tool {tool}"),
    )
    .await
}

/// The prices page.
#[server(prefix = "/fn", endpoint = "load_prices")]
pub async fn load_prices() -> Result<PricesPage, AppError> {
    use super::ssr;
    use store::{audit, runs};
    ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let rules = ssr::state()?.rules.refresh(&db).await?;
    let mut prices = rules.prices.prices.clone();
    prices.sort_by(|a, b| {
        (b.source, a.pattern.to_lowercase(), a.valid_from).cmp(&(a.source, b.pattern.to_lowercase(), b.valid_from))
    });
    let month_ago = (chrono::Utc::now() - chrono::Duration::days(30)).timestamp_nanos_opt().unwrap_or(0);
    let unpriced_models = runs::unpriced_models_since(&db, month_ago).await?;
    let recomputes = audit::list(&db, None, Some(audit::action::RUNS_RECOMPUTED), 5).await?.entries;
    Ok(PricesPage { prices, unpriced_models, recomputes, today: chrono::Utc::now().date_naive() })
}

/// Adds or replaces an admin price. Numbers arrive as text from the form; cache and
/// reasoning prices may be left empty (the input or output price applies).
#[server(prefix = "/fn", endpoint = "save_price")]
#[allow(clippy::too_many_arguments)]
pub async fn save_price(
    pattern: String,
    valid_from: String,
    input: String,
    output: String,
    #[server(default)] cache_read: Option<String>,
    #[server(default)] cache_write: Option<String>,
    #[server(default)] reasoning: Option<String>,
) -> Result<(), AppError> {
    use super::ssr;
    use domain::pricing::{ModelPrice, PriceSource};
    use store::audit::action;
    use store::prices;
    let admin = ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let number = |field: &str, text: &str| -> Result<f64, AppError> {
        text.trim().parse::<f64>().map_err(|_| {
            AppError::Invalid(format!("{field} is dollars per million tokens, like 2.5; got `{}`", text.trim()))
        })
    };
    let optional = |field: &str, text: Option<String>| -> Result<Option<f64>, AppError> {
        match text.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            None => Ok(None),
            Some(t) => number(field, t).map(Some),
        }
    };
    let parsed = (|| -> Result<ModelPrice, AppError> {
        let valid_from = chrono::NaiveDate::parse_from_str(valid_from.trim(), "%Y-%m-%d").map_err(|_| {
            AppError::Invalid(format!("valid from is a date like 2026-01-01, got `{}`", valid_from.trim()))
        })?;
        let price = ModelPrice {
            pattern: pattern.trim().to_string(),
            valid_from,
            input: number("input", &input)?,
            output: number("output", &output)?,
            cache_read: optional("cache read", cache_read)?,
            cache_write: optional("cache write", cache_write)?,
            reasoning: optional("reasoning", reasoning)?,
            source: PriceSource::Admin,
        };
        price.validate().map_err(AppError::Invalid)?;
        Ok(price)
    })();
    let price = match parsed {
        Ok(p) => p,
        Err(e) => return ssr::fail(e),
    };
    prices::upsert(&db, &price).await?;
    ssr::state()?.rules.refresh(&db).await?;
    let detail = format!(
        "from {}: input ${}, output ${}, cache read {}, cache write {}, reasoning {} per million tokens",
        price.valid_from,
        price.input,
        price.output,
        price.cache_read.map(|v| format!("${v}")).unwrap_or_else(|| "= input".into()),
        price.cache_write.map(|v| format!("${v}")).unwrap_or_else(|| "= input".into()),
        price.reasoning.map(|v| format!("${v}")).unwrap_or_else(|| "= output".into()),
    );
    ssr::audit(&db, &admin, action::PRICE_SAVED, &price.pattern, Some(&detail)).await
}

#[server(prefix = "/fn", endpoint = "delete_price")]
pub async fn delete_price(pattern: String, valid_from: String) -> Result<(), AppError> {
    use super::ssr;
    use store::audit::action;
    use store::prices;
    let admin = ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let Ok(day) = chrono::NaiveDate::parse_from_str(valid_from.trim(), "%Y-%m-%d") else {
        return ssr::fail(AppError::Invalid(format!("valid from is a date like 2026-01-01, got `{valid_from}`")));
    };
    if !prices::delete(&db, &pattern, day).await? {
        return ssr::fail(AppError::NotFound(format!("admin price `{pattern}` from {day}")));
    }
    ssr::state()?.rules.refresh(&db).await?;
    ssr::audit(&db, &admin, action::PRICE_DELETED, &pattern, Some(&format!("from {day}"))).await
}

/// Recomputes the cost (and flags) of stored runs that started in a period, under the
/// prices as they are now. Dates are UTC days; `until` is inclusive.
#[server(prefix = "/fn", endpoint = "recompute_runs")]
pub async fn recompute_runs(since: String, until: String) -> Result<(), AppError> {
    use super::ssr;
    use store::recompute::Scope;
    let admin = ssr::require(domain::access::Role::Admin)?;
    let day = |field: &str, text: &str| {
        chrono::NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
            .map_err(|_| AppError::Invalid(format!("{field} is a date like 2026-01-01, got `{}`", text.trim())))
    };
    let (since_day, until_day) = match (day("from", &since), day("to", &until)) {
        (Ok(a), Ok(b)) if a <= b => (a, b),
        (Ok(_), Ok(_)) => return ssr::fail(AppError::Invalid("the period ends before it starts".into())),
        (Err(e), _) | (_, Err(e)) => return ssr::fail(e),
    };
    let ns = |d: chrono::NaiveDate| d.and_hms_opt(0, 0, 0).and_then(|t| t.and_utc().timestamp_nanos_opt());
    let scope = Scope { since_ns: ns(since_day), until_ns: ns(until_day + chrono::Duration::days(1)), tools: None };
    recompute_in_background(admin.username.clone(), scope, format!("runs started {since_day} to {until_day}")).await
}

/// Starts a recompute under the current rules and returns; the audit log says when it
/// finished and how many runs changed.
#[cfg(feature = "ssr")]
pub(crate) async fn recompute_in_background(
    actor: String,
    scope: store::recompute::Scope,
    what: String,
) -> Result<(), AppError> {
    use super::ssr;
    use store::audit::{self, action, NewEntry};
    use store::recompute::recompute;
    let state = ssr::state()?;
    let rules = state.rules.refresh(&state.db).await?;
    let db = state.db.clone();
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        let detail = match recompute(&db, &rules, &scope, RECOMPUTE_BATCH).await {
            Ok(done) => format!(
                "{what}: {} runs read, {} changed, in {:.1} s",
                done.runs,
                done.changed,
                started.elapsed().as_secs_f64()
            ),
            Err(e) => {
                tracing::error!(error = %e, "recompute failed");
                format!("{what}: failed ({e}); runs recomputed before the failure keep their new figures")
            }
        };
        let entry = NewEntry {
            actor: Some(&actor),
            action: action::RUNS_RECOMPUTED,
            target: Some(&what),
            detail: Some(&detail),
            source: None,
        };
        if let Err(e) = audit::record(&db, entry).await {
            tracing::error!(error = %e, "could not record the recompute");
        }
    });
    Ok(())
}

/// Runs per recompute transaction: small enough that ingest waits milliseconds.
#[cfg(feature = "ssr")]
const RECOMPUTE_BATCH: i64 = 200;
