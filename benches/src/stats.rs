//! The harness's one home for statistics: nearest-rank percentiles, medians,
//! the latency summary rows, ratios and the empirical CDF of the plots, on
//! `statrs` (selection, median, mean, empirical distribution). Non-finite
//! values are left out everywhere.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Empirical};
use statrs::statistics::{Data, Distribution, Max, Median, Min, OrderStatistics};

/// Milliseconds of a duration, as a float.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The finite values of `values`; `None` when there are none.
fn data(values: &[f64]) -> Option<Data<Vec<f64>>> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    (!finite.is_empty()).then(|| Data::new(finite))
}

/// Nearest-rank percentile `p` (0 < p ≤ 100) of `data`: the smallest value with
/// at least p % of the samples at or below it.
fn nearest_rank(data: &mut Data<Vec<f64>>, p: f64) -> Option<f64> {
    if !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let n = data.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(data.order_statistic(rank.clamp(1, n)))
}

/// Nearest-rank percentile `p` (0 < p ≤ 100) of `values` (any order).
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    nearest_rank(&mut data(values)?, p)
}

/// The median: the mean of the two middle values for an even count.
pub fn median(values: &[f64]) -> Option<f64> {
    Some(data(values)?.median())
}

/// The median of whole numbers (KiB figures), rounded down.
pub fn median_u64(values: &[u64]) -> Option<u64> {
    let floats: Vec<f64> = values.iter().map(|&v| v as f64).collect();
    median(&floats).map(|m| m as u64)
}

/// Smallest and largest of `values`.
pub fn range(values: &[f64]) -> Option<(f64, f64)> {
    let d = data(values)?;
    Some((d.min(), d.max()))
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
        let mut d = data(values)?;
        Some(Summary {
            n: d.len(),
            min: d.min(),
            p50: d.median(),
            p90: nearest_rank(&mut d, 90.0)?,
            p99: nearest_rank(&mut d, 99.0)?,
            max: d.max(),
            mean: d.mean()?,
        })
    }
}

/// `a / b`, or `None` when `b` is not a positive number.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite()).then(|| a / b)
}

/// [`ratio`] of two values that may be missing.
pub fn ratio_of(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    ratio(a?, b?)
}

/// The empirical CDF of `values`: each distinct value, ascending, with the
/// fraction of the samples at or below it.
pub fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut distinct: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let ecdf: Empirical = distinct.iter().copied().collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    distinct.into_iter().map(|v| (v, ecdf.cdf(v))).collect()
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
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, 1.0]), Some(1.0));
        assert_eq!(median_u64(&[5000, 6001]), Some(5500));
        assert_eq!(median_u64(&[]), None);
    }

    #[test]
    fn summary_fields() {
        let s = Summary::of(&[2.0, 4.0, 6.0, 8.0]).unwrap();
        assert_eq!((s.n, s.min, s.max, s.mean, s.p50), (4, 2.0, 8.0, 5.0, 5.0));
        assert_eq!((s.p90, s.p99), (8.0, 8.0));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn ratio_range_and_cdf() {
        assert_eq!(ratio(1.0, 4.0), Some(0.25));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio_of(Some(1.0), None), None);
        assert_eq!(range(&[3.0, 1.0, 2.0]), Some((1.0, 3.0)));
        assert_eq!(range(&[]), None);
        assert_eq!(cdf(&[3.0, 1.0]), vec![(1.0, 0.5), (3.0, 1.0)]);
        assert_eq!(
            cdf(&[2.0, 1.0, 2.0, 4.0]),
            vec![(1.0, 0.25), (2.0, 0.75), (4.0, 1.0)]
        );
        assert_eq!(ms(Duration::from_micros(1500)), 1.5);
    }
}
