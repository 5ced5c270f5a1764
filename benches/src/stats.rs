//! Order statistics of latency samples: nearest-rank percentiles, median, and the
//! summary rows the report prints.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Milliseconds of a duration, as a float.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Nearest-rank percentile `p` (0 < p ≤ 100) of `values` (any order, no NaN):
/// the smallest value with at least p % of the samples at or below it.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() || !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// The median: the mean of the two middle values for an even count.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    Some(if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    })
}

/// Summary of one set of samples (milliseconds, or whatever unit they were in).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Smallest.
    pub min: f64,
    /// Median (nearest-rank p50 would bias odd/even; this is the true median).
    pub p50: f64,
    /// Nearest-rank 90th percentile.
    pub p90: f64,
    /// Nearest-rank 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl Summary {
    /// The summary of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let n = values.len();
        Some(Summary {
            n,
            min: values.iter().copied().reduce(f64::min)?,
            p50: median(values)?,
            p90: percentile(values, 90.0)?,
            p99: percentile(values, 99.0)?,
            max: values.iter().copied().reduce(f64::max)?,
            mean: values.iter().sum::<f64>() / n as f64,
        })
    }
}

/// `a / b`, or `None` when `b` is not a positive number.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite()).then(|| a / b)
}

/// The empirical CDF of `values`: sorted values with cumulative fractions (k/n).
pub fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    sorted
        .into_iter()
        .enumerate()
        .map(|(i, v)| (v, (i + 1) as f64 / n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 90.0), Some(90.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&v, 0.5), Some(1.0));
        // 5 samples: p90 is rank ceil(4.5) = 5, the largest.
        assert_eq!(percentile(&[3.0, 1.0, 2.0, 5.0, 4.0], 90.0), Some(5.0));
        assert_eq!(percentile(&[3.0, 1.0, 2.0, 5.0, 4.0], 40.0), Some(2.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[1.0], 0.0), None);
        assert_eq!(percentile(&[1.0], 101.0), None);
    }

    #[test]
    fn median_odd_and_even() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn summary_fields() {
        let s = Summary::of(&[2.0, 4.0, 6.0, 8.0]).unwrap();
        assert_eq!((s.n, s.min, s.max, s.mean, s.p50), (4, 2.0, 8.0, 5.0, 5.0));
        assert_eq!((s.p90, s.p99), (8.0, 8.0));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn ratio_and_cdf() {
        assert_eq!(ratio(1.0, 4.0), Some(0.25));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(cdf(&[3.0, 1.0]), vec![(1.0, 0.5), (3.0, 1.0)]);
        assert_eq!(ms(Duration::from_micros(1500)), 1.5);
    }
}
