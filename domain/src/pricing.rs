//! Model prices: what a step cost when the agent did not say. Agents on the standard
//! GenAI and OpenInference conventions report tokens, not money; without a price table
//! their runs would show $0 and the cost alert would never fire for them.
//!
//! A price belongs to a model-name pattern (`*` wildcards, case-insensitive, matched
//! against the name after any `provider/` prefix) and holds from a date, so a price
//! change never rewrites what earlier runs cost. Prices come from three places, in order
//! of precedence: the admin page, the config file (`[[prices]]`), and the table shipped
//! here. Pure and in both builds: the admin page shows the same table the server uses.

use crate::pattern::glob_ignore_case;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

crate::vocabulary::vocabulary! {
    /// Where a price came from; a higher one overrides a lower one for the same model.
    PriceSource {
        Builtin = "builtin",
        Config = "config",
        Admin = "admin",
    }
}

impl PriceSource {
    fn rank(self) -> u8 {
        match self {
            PriceSource::Builtin => 0,
            PriceSource::Config => 1,
            PriceSource::Admin => 2,
        }
    }
}

/// The price of one model (or family) from a date, in US dollars per million tokens.
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// A model name or a pattern with `*` wildcards (`gpt-4.1-mini*`, `*claude-sonnet-4*`).
    pub pattern: String,
    /// The first day (UTC) this price holds; steps before it use an older price.
    pub valid_from: NaiveDate,
    /// Uncached input tokens.
    pub input: f64,
    pub output: f64,
    /// Input read from the provider's prompt cache; the input price when absent.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Input written to the prompt cache; the input price when absent.
    #[serde(default)]
    pub cache_write: Option<f64>,
    /// Reasoning tokens, counted within output; the output price when absent.
    #[serde(default)]
    pub reasoning: Option<f64>,
    /// Set by whoever loads the price (a config file's `source` is overwritten with
    /// `config`); it travels with the price to the browser, so it must deserialize.
    #[serde(default = "builtin_source")]
    pub source: PriceSource,
}

fn builtin_source() -> PriceSource {
    PriceSource::Builtin
}

/// The tokens of one model call, in the canonical meaning: `input` excludes the cache
/// reads and writes (the article's `step.input_tokens`), `output` includes reasoning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: i64,
    pub output: i64,
    pub cache_read: i64,
    pub cache_write: i64,
    pub reasoning: i64,
}

impl Tokens {
    pub fn is_empty(&self) -> bool {
        self.input == 0 && self.output == 0 && self.cache_read == 0 && self.cache_write == 0
    }
}

impl ModelPrice {
    /// What `tokens` cost at this price, in dollars.
    pub fn cost(&self, t: &Tokens) -> f64 {
        let per_token = |n: i64, usd_per_mtok: f64| n.max(0) as f64 * usd_per_mtok / 1e6;
        let reasoning = t.reasoning.clamp(0, t.output.max(0));
        per_token(t.input, self.input)
            + per_token(t.cache_read, self.cache_read.unwrap_or(self.input))
            + per_token(t.cache_write, self.cache_write.unwrap_or(self.input))
            + per_token(t.output - reasoning, self.output)
            + per_token(reasoning, self.reasoning.unwrap_or(self.output))
    }

    /// Checks what an admin or a config file may get wrong.
    pub fn validate(&self) -> Result<(), String> {
        let pattern = self.pattern.trim();
        if pattern.is_empty() || pattern.chars().all(|c| c == '*') {
            return Err("the pattern must name a model (a bare `*` would price every model alike)".into());
        }
        if pattern.len() > 200 {
            return Err("the pattern is longer than 200 characters".into());
        }
        let prices = [Some(self.input), Some(self.output), self.cache_read, self.cache_write, self.reasoning];
        if prices.iter().flatten().any(|p| !p.is_finite() || *p < 0.0 || *p > 100_000.0) {
            return Err("prices are dollars per million tokens, from 0 to 100000".into());
        }
        Ok(())
    }

    /// How closely the pattern names a model: its literal characters.
    fn specificity(&self) -> usize {
        self.pattern.chars().filter(|c| *c != '*').count()
    }
}

/// The part of a model name prices are matched against (in any case): without a
/// `provider/` prefix.
pub fn model_key(model: &str) -> &str {
    model.rsplit('/').next().unwrap_or(model).trim()
}

/// Every known price; look one up with [`PriceTable::find`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PriceTable {
    pub prices: Vec<ModelPrice>,
}

impl PriceTable {
    /// The shipped prices followed by `overrides` (config, then admin entries).
    pub fn with_overrides(overrides: impl IntoIterator<Item = ModelPrice>) -> PriceTable {
        let mut prices = builtin();
        prices.extend(overrides);
        PriceTable { prices }
    }

    /// The price of `model` for a call at `at`: among the patterns that match and hold by
    /// then, the highest source wins (admin over config over shipped), then the most
    /// specific pattern (`gpt-4.1-mini*` over `gpt-4.1*`), then the latest date.
    pub fn find(&self, model: &str, at: DateTime<Utc>) -> Option<&ModelPrice> {
        let key = model_key(model);
        let day = at.date_naive();
        self.prices
            .iter()
            .filter(|p| p.valid_from <= day && glob_ignore_case(&p.pattern, key))
            .max_by_key(|p| (p.source.rank(), p.specificity(), p.valid_from))
    }
}

/// One shipped price: pattern, first day, input, output, cache read, cache write.
type Row = (&'static str, &'static str, f64, f64, Option<f64>, Option<f64>);

/// List prices of the common hosted models in US dollars per million tokens, as the
/// providers published them (standard tier, prompts up to 200k tokens). Providers change
/// them; a deployment corrects or extends them in its config file or on the admin page.
const SHIPPED: &[Row] = &[
    // OpenAI: cached input is read at a discount; writing the cache costs nothing extra.
    ("gpt-3.5-turbo*", "2024-01-25", 0.50, 1.50, None, None),
    ("gpt-4-turbo*", "2024-04-09", 10.00, 30.00, None, None),
    ("gpt-4o*", "2024-05-13", 2.50, 10.00, Some(1.25), None),
    ("gpt-4o-mini*", "2024-07-18", 0.15, 0.60, Some(0.075), None),
    ("gpt-4.1*", "2025-04-14", 2.00, 8.00, Some(0.50), None),
    ("gpt-4.1-mini*", "2025-04-14", 0.40, 1.60, Some(0.10), None),
    ("gpt-4.1-nano*", "2025-04-14", 0.10, 0.40, Some(0.025), None),
    ("gpt-5*", "2025-08-07", 1.25, 10.00, Some(0.125), None),
    ("gpt-5-mini*", "2025-08-07", 0.25, 2.00, Some(0.025), None),
    ("gpt-5-nano*", "2025-08-07", 0.05, 0.40, Some(0.005), None),
    ("o1*", "2024-12-17", 15.00, 60.00, Some(7.50), None),
    ("o1-mini*", "2024-09-12", 1.10, 4.40, Some(0.55), None),
    ("o3*", "2025-04-16", 10.00, 40.00, Some(2.50), None),
    ("o3*", "2025-06-10", 2.00, 8.00, Some(0.50), None),
    ("o3-mini*", "2025-01-31", 1.10, 4.40, Some(0.55), None),
    ("o4-mini*", "2025-04-16", 1.10, 4.40, Some(0.275), None),
    // Anthropic: five-minute cache writes at 1.25x input, reads at 0.1x.
    ("*claude-3-haiku*", "2024-03-07", 0.25, 1.25, Some(0.03), Some(0.30)),
    ("*claude-3-opus*", "2024-02-29", 15.00, 75.00, Some(1.50), Some(18.75)),
    ("*claude-3-5-sonnet*", "2024-06-20", 3.00, 15.00, Some(0.30), Some(3.75)),
    ("*claude-3-5-haiku*", "2024-10-22", 0.80, 4.00, Some(0.08), Some(1.00)),
    ("*claude-3-7-sonnet*", "2025-02-24", 3.00, 15.00, Some(0.30), Some(3.75)),
    ("*claude-sonnet-4*", "2025-05-22", 3.00, 15.00, Some(0.30), Some(3.75)),
    ("*claude-opus-4*", "2025-05-22", 15.00, 75.00, Some(1.50), Some(18.75)),
    ("*claude-haiku-4*", "2025-10-15", 1.00, 5.00, Some(0.10), Some(1.25)),
    ("*claude-opus-4-5*", "2025-11-24", 5.00, 25.00, Some(0.50), Some(6.25)),
    // Google: context-cache reads; thinking tokens are billed as output.
    ("*gemini-1.5-flash*", "2024-08-12", 0.075, 0.30, Some(0.01875), None),
    ("*gemini-1.5-pro*", "2024-10-01", 1.25, 5.00, Some(0.3125), None),
    ("*gemini-2.0-flash*", "2025-02-05", 0.10, 0.40, Some(0.025), None),
    ("*gemini-2.0-flash-lite*", "2025-02-25", 0.075, 0.30, None, None),
    ("*gemini-2.5-pro*", "2025-06-17", 1.25, 10.00, Some(0.125), None),
    ("*gemini-2.5-flash*", "2025-06-17", 0.30, 2.50, Some(0.03), None),
    ("*gemini-2.5-flash-lite*", "2025-07-22", 0.10, 0.40, Some(0.01), None),
];

/// The shipped prices.
pub fn builtin() -> Vec<ModelPrice> {
    SHIPPED
        .iter()
        .map(|&(pattern, from, input, output, cache_read, cache_write)| ModelPrice {
            pattern: pattern.to_string(),
            valid_from: NaiveDate::parse_from_str(from, "%Y-%m-%d").expect("shipped dates are valid"),
            input,
            output,
            cache_read,
            cache_write,
            reasoning: None,
            source: PriceSource::Builtin,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, 12, 0, 0).unwrap()
    }

    #[test]
    fn the_most_specific_pattern_wins_and_provider_prefixes_are_ignored() {
        let table = PriceTable::with_overrides([]);
        let now = at(2026, 1, 1);
        assert_eq!(table.find("gpt-4.1-mini-2025-04-14", now).unwrap().pattern, "gpt-4.1-mini*");
        assert_eq!(table.find("gpt-4.1", now).unwrap().pattern, "gpt-4.1*");
        assert_eq!(table.find("openai/GPT-4o-mini", now).unwrap().pattern, "gpt-4o-mini*");
        assert_eq!(table.find("us.anthropic.claude-sonnet-4-5-20250929-v1:0", now).unwrap().input, 3.0);
        assert_eq!(table.find("claude-opus-4-5-20251101", now).unwrap().input, 5.0);
        assert_eq!(table.find("claude-opus-4-1", now).unwrap().input, 15.0);
        assert_eq!(table.find("gemini-2.5-flash-lite", now).unwrap().pattern, "*gemini-2.5-flash-lite*");
        assert!(table.find("my-own-llama", now).is_none());
        assert!(table.find("", now).is_none());
    }

    #[test]
    fn a_price_holds_from_its_date() {
        let table = PriceTable::with_overrides([]);
        assert_eq!(table.find("o3", at(2025, 5, 1)).unwrap().input, 10.0);
        assert_eq!(table.find("o3", at(2025, 7, 1)).unwrap().input, 2.0);
        assert!(table.find("gpt-5", at(2025, 1, 1)).is_none(), "no price before the model existed");
    }

    #[test]
    fn admin_beats_config_beats_shipped_whatever_the_pattern() {
        let mine = |pattern: &str, input: f64, source| ModelPrice {
            pattern: pattern.into(),
            valid_from: NaiveDate::from_ymd_opt(2020, 1, 1).unwrap(),
            input,
            output: 1.0,
            cache_read: None,
            cache_write: None,
            reasoning: None,
            source,
        };
        let table = PriceTable::with_overrides([
            mine("gpt-4*", 9.0, PriceSource::Config),
            mine("GPT-4.1-MINI", 7.0, PriceSource::Admin),
        ]);
        let now = at(2026, 1, 1);
        assert_eq!(table.find("gpt-4.1-mini", now).unwrap().input, 7.0);
        assert_eq!(table.find("gpt-4.1", now).unwrap().input, 9.0, "config over the shipped gpt-4.1*");
    }

    #[test]
    fn cost_prices_each_kind_of_token() {
        let p = ModelPrice {
            pattern: "m".into(),
            valid_from: NaiveDate::from_ymd_opt(2020, 1, 1).unwrap(),
            input: 3.0,
            output: 15.0,
            cache_read: Some(0.3),
            cache_write: Some(3.75),
            reasoning: Some(20.0),
            source: PriceSource::Builtin,
        };
        let t =
            Tokens { input: 1_000_000, output: 100_000, cache_read: 2_000_000, cache_write: 10_000, reasoning: 50_000 };
        let want = 3.0 + 0.05 * 15.0 + 0.6 + 0.0375 + 0.05 * 20.0;
        assert!((p.cost(&t) - want).abs() < 1e-9, "{} != {want}", p.cost(&t));
        // Absent cache and reasoning prices fall back to input and output.
        let plain = ModelPrice { cache_read: None, cache_write: None, reasoning: None, ..p.clone() };
        let t = Tokens { input: 0, output: 10, cache_read: 10, cache_write: 10, reasoning: 20 };
        assert!(
            (plain.cost(&t) - (10.0 * 3.0 + 10.0 * 3.0 + 10.0 * 15.0) / 1e6).abs() < 1e-12,
            "reasoning within output"
        );
    }

    #[test]
    fn nonsense_prices_are_refused() {
        let ok = builtin()[0].clone();
        assert!(ok.validate().is_ok());
        assert!(ModelPrice { pattern: "**".into(), ..ok.clone() }.validate().is_err());
        assert!(ModelPrice { input: -1.0, ..ok.clone() }.validate().is_err());
        assert!(ModelPrice { output: f64::NAN, ..ok.clone() }.validate().is_err());
        assert!(builtin().iter().all(|p| p.validate().is_ok()));
    }

    #[test]
    fn a_price_survives_the_trip_to_the_browser() {
        let admin = ModelPrice { source: PriceSource::Admin, ..builtin()[0].clone() };
        let back: ModelPrice = serde_json::from_str(&serde_json::to_string(&admin).unwrap()).unwrap();
        assert_eq!(back, admin, "pages hydrate from this JSON");
    }
}
