//! The rules derivation reads, kept current for the ingest writer and the pages: tool
//! policies and the price table (admin prices over the config file's over the shipped
//! ones). Whoever changes a policy or a price refreshes it at once; the ingest service
//! also refreshes it every few seconds, which is how other instances learn of a change.

use super::{policies, prices, Db, StoreResult};
use domain::derive::Rules;
use domain::pricing::{ModelPrice, PriceSource, PriceTable};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

#[derive(Clone, Default)]
pub struct RulesCache {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The rules, with the number of the refresh that read them.
    current: RwLock<(u64, Arc<Rules>)>,
    refreshes: AtomicU64,
    /// `[[prices]]` from the config file.
    config_prices: Vec<ModelPrice>,
}

impl std::fmt::Debug for RulesCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RulesCache").field("config_prices", &self.inner.config_prices.len()).finish()
    }
}

impl RulesCache {
    /// Shipped prices and the config file's, no policies until the first refresh.
    pub fn new(config_prices: Vec<ModelPrice>) -> RulesCache {
        let config_prices: Vec<ModelPrice> =
            config_prices.into_iter().map(|p| ModelPrice { source: PriceSource::Config, ..p }).collect();
        let rules = Rules { prices: PriceTable::with_overrides(config_prices.clone()), policies: Vec::new() };
        RulesCache {
            inner: Arc::new(Inner {
                current: RwLock::new((0, Arc::new(rules))),
                refreshes: AtomicU64::new(0),
                config_prices,
            }),
        }
    }

    pub fn current(&self) -> Arc<Rules> {
        self.inner.current.read().expect("rules lock").1.clone()
    }

    /// The config file's prices (the admin page shows where each price comes from).
    pub fn config_prices(&self) -> &[ModelPrice] {
        &self.inner.config_prices
    }

    /// Reads policies and admin prices again.
    pub async fn refresh(&self, db: &Db) -> StoreResult<Arc<Rules>> {
        // Numbered before reading: a refresh that read earlier (the periodic one, say) but
        // finished later never replaces what a newer one stored.
        let number = self.inner.refreshes.fetch_add(1, Ordering::SeqCst) + 1;
        let policies = policies::list(db).await?;
        let admin = prices::list(db).await?;
        let rules = Arc::new(Rules {
            prices: PriceTable::with_overrides(self.inner.config_prices.iter().cloned().chain(admin)),
            policies,
        });
        let mut current = self.inner.current.write().expect("rules lock");
        if number > current.0 {
            *current = (number, rules);
        }
        Ok(current.1.clone())
    }
}
