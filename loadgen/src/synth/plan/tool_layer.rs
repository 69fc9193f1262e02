//! The tool layer under the agent: it runs one call, retries errors and timeouts, and,
//! when the run's deployment keeps an execution ledger, answers a repeat of a call that
//! already succeeded from the ledger instead of running it again (`deduped`). Without a
//! ledger the repeat runs and succeeds again: the duplicate side effect.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::Rng;

use super::{Call, Outcome, ToolExec};
use crate::synth::catalog::{self, SideEffect};
use crate::synth::draw::{self, NANOS_PER_MS};

/// The tool layer gives up after this many attempts of one call.
const MAX_ATTEMPTS: u32 = 3;

#[derive(Default)]
pub(super) struct ToolLayer {
    /// Whether this run's tool layer consults the ledger before executing.
    pub keeps_ledger: bool,
    /// The ledger: the external id of the first successful execution per idempotency key
    /// (None when the tool creates nothing). Kept even without `keeps_ledger`, as the
    /// record of what happened.
    succeeded: HashMap<String, Option<String>>,
}

impl ToolLayer {
    /// Runs one call through the tool layer, with its retries, starting at `clock` and
    /// advancing it. `forced`: the outcome every attempt must have.
    pub(super) fn execute(
        &mut self,
        rng: &mut StdRng,
        calls: &[Call],
        call: usize,
        forced: Option<Outcome>,
        clock: &mut u64,
    ) -> Vec<ToolExec> {
        let tool = calls[call].tool;
        let key = &calls[call].idempotency_key;
        let call_id = format!("call_{}", draw::hex::<12>(rng));
        // A forced failure exhausts a random number of attempts; a crash is a single one.
        let forced_attempts = match forced {
            Some(Outcome::Error) => rng.gen_range(1..=MAX_ATTEMPTS),
            _ => 1,
        };
        let mut execs = Vec::new();
        for attempt in 1..=MAX_ATTEMPTS {
            let pause = if attempt == 1 { draw::ms(rng, 1..30) } else { draw::ms(rng, 200..2_000) };
            let start = *clock + pause;
            let already = tool.side_effect.changes_state().then(|| self.succeeded.get(key).cloned()).flatten();
            let outcome = match (forced, already.is_some() && self.keeps_ledger) {
                (Some(outcome), _) => outcome,
                (None, true) => Outcome::Deduped,
                (None, false) => Self::sample_outcome(rng, tool.side_effect),
            };
            let latency_ms = match outcome {
                Outcome::Timeout => catalog::TIMEOUT_MS + rng.gen_range(0..40),
                Outcome::Deduped => rng.gen_range(1..15),
                Outcome::Denied => rng.gen_range(5..60),
                Outcome::Ok | Outcome::Error => rng.gen_range(tool.latency_ms.0..=tool.latency_ms.1),
            };
            let external_id = match outcome {
                Outcome::Ok => tool.creates.map(|prefix| format!("{prefix}{}", draw::hex::<12>(rng))),
                Outcome::Deduped => already.flatten(),
                _ => None,
            };
            if outcome == Outcome::Ok && tool.side_effect.changes_state() {
                self.succeeded.entry(key.clone()).or_insert_with(|| external_id.clone());
            }
            let error = match outcome {
                Outcome::Timeout => Some(catalog::TIMEOUT_MESSAGE.to_string()),
                Outcome::Error => Some(draw::pick(rng, tool.errors).to_string()),
                Outcome::Denied => Some(draw::pick(rng, &catalog::DENIALS).to_string()),
                Outcome::Ok | Outcome::Deduped => None,
            };
            let end = start + latency_ms * NANOS_PER_MS;
            *clock = end;
            execs.push(ToolExec {
                span_id: draw::id::<8>(rng),
                call,
                call_id: call_id.clone(),
                attempt,
                outcome,
                latency_ms,
                start,
                end,
                external_id,
                error,
            });
            let retry = match forced {
                Some(_) => attempt < forced_attempts,
                // The tool layer retries errors and timeouts, most of the time.
                None => matches!(outcome, Outcome::Error | Outcome::Timeout) && rng.gen_bool(0.6),
            };
            if !retry {
                break;
            }
        }
        execs
    }

    fn sample_outcome(rng: &mut StdRng, side_effect: SideEffect) -> Outcome {
        // ok, error, timeout, denied
        let weights: &[u32] = match side_effect {
            SideEffect::None => &[97, 3, 0, 0],
            SideEffect::Read => &[88, 5, 7, 0],
            SideEffect::Write => &[85, 5, 6, 4],
            SideEffect::Irreversible => &[80, 4, 4, 12],
        };
        [Outcome::Ok, Outcome::Error, Outcome::Timeout, Outcome::Denied][draw::weighted(rng, weights)]
    }
}
