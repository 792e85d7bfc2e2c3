//! What the reference's checks (`app.core.model.validate_partitions`, `_checked_previous`) take, on arrays:
//! a request or Problem passing these needs no Python check but the sums'. Failing one says only "let the
//! reference find what is wrong": it words the error.

use crate::input::Index;

/// A rate or a lag the reference takes: finite and at least 0 (-0.0 too).
pub fn number(value: f64) -> bool {
    value.is_finite() && value >= 0.0
}

/// Partitions the reference takes: a rate and a lag (or none) for each, numbers it takes, each (topic,
/// partition) once (`topics`: how many topics the keys name).
pub fn partitions(keys: &[(u32, i64)], topics: usize, rates: &[f64], lags: &[Option<f64>]) -> bool {
    rates.len() == keys.len()
        && lags.len() == keys.len()
        && rates.iter().all(|&r| number(r))
        && lags.iter().flatten().all(|&l| number(l))
        && Index::new(keys, topics).is_some()
}

/// A previous assignment the reference takes: consumer ids not empty, no partition held twice.
pub fn previous(consumers: &[&str], held: &[(u32, i64)], topics: usize) -> bool {
    consumers.iter().all(|c| !c.is_empty()) && Index::new(held, topics).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_what_the_reference_takes() {
        let keys = [(0, 0), (0, 1), (1, 0)];
        assert!(partitions(
            &keys,
            2,
            &[0.0, -0.0, 5.5],
            &[None, Some(1.0), None]
        ));
        assert!(!partitions(&keys, 2, &[0.0, -1.0, 5.5], &[None; 3]));
        assert!(!partitions(&keys, 2, &[0.0, f64::NAN, 5.5], &[None; 3]));
        assert!(!partitions(
            &keys,
            2,
            &[0.0, 1.0, 5.5],
            &[None, Some(f64::INFINITY), None]
        ));
        assert!(!partitions(&keys, 2, &[0.0, 1.0], &[None; 3]));
        assert!(!partitions(&[(0, 0), (0, 0)], 1, &[1.0, 1.0], &[None; 2]));
        assert!(previous(&["c1", "c2"], &[(0, 0), (5, 1)], 6));
        assert!(!previous(&["c1", ""], &[], 0));
        assert!(!previous(&["c1"], &[(0, 3), (0, 3)], 1));
    }
}
