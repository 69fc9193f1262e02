//! Small statistics shared by alerts, trends and `/metrics`: nearest-rank quantiles over
//! plain numbers. Pure, so each caller's figures agree with the others'.

/// The nearest-rank quantile `q` (0.0..=1.0) of `sorted`, which must be sorted ascending;
/// `None` when it is empty. Nearest rank (not interpolation) so the value is always one
/// that was observed: "p99 cost per run is 0.42" names a real run's cost.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Sorts `values` (NaN last) and returns the quantiles asked for, in order.
pub fn quantiles(mut values: Vec<f64>, qs: &[f64]) -> Vec<Option<f64>> {
    values.sort_by(|a, b| a.total_cmp(b));
    qs.iter().map(|&q| quantile_sorted(&values, q)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_picks_an_observed_value() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile_sorted(&values, 0.5), Some(50.0));
        assert_eq!(quantile_sorted(&values, 0.95), Some(95.0));
        assert_eq!(quantile_sorted(&values, 0.99), Some(99.0));
        assert_eq!(quantile_sorted(&values, 1.0), Some(100.0));
        assert_eq!(quantile_sorted(&values, 0.0), Some(1.0));
    }

    #[test]
    fn small_samples_and_empty() {
        assert_eq!(quantile_sorted(&[], 0.5), None);
        assert_eq!(quantile_sorted(&[7.0], 0.99), Some(7.0));
        assert_eq!(quantiles(vec![3.0, 1.0, 2.0], &[0.5, 0.99]), vec![Some(2.0), Some(3.0)]);
    }
}
