//! Drawing values from the seeded generator: weighted choices, pauses, ids.

use std::ops::Range;

use rand::distributions::{Distribution, WeightedIndex};
use rand::rngs::StdRng;
use rand::{Rng, RngCore};

pub(crate) const NANOS_PER_MS: u64 = 1_000_000;

/// An index into `weights`, chosen in proportion to them.
pub(crate) fn weighted(rng: &mut StdRng, weights: &[u32]) -> usize {
    WeightedIndex::new(weights).expect("every weight list has a non-zero entry").sample(rng)
}

/// One of `pool`, uniformly.
pub(crate) fn pick<T: Copy>(rng: &mut StdRng, pool: &[T]) -> T {
    pool[rng.gen_range(0..pool.len())]
}

/// A pause of so many milliseconds, at nanosecond resolution like real timestamps.
pub(crate) fn ms(rng: &mut StdRng, range: Range<u64>) -> u64 {
    rng.gen_range(range.start * NANOS_PER_MS..range.end * NANOS_PER_MS)
}

/// A random id; all-zero ids are invalid in OTLP, so one is never returned.
pub(crate) fn id<const N: usize>(rng: &mut StdRng) -> [u8; N] {
    let mut id = [0u8; N];
    while id.iter().all(|&b| b == 0) {
        rng.fill_bytes(&mut id);
    }
    id
}

pub(crate) fn hex<const N: usize>(rng: &mut StdRng) -> String {
    hex::encode(id::<N>(rng))
}
