//! Criterion's estimates (`target/criterion/**/new/estimates.json`), gathered for
//! the report.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// One criterion benchmark's estimates, nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionEstimate {
    /// The benchmark id ("ipam/allocate_release" ...).
    pub id: String,
    /// Mean, ns.
    pub mean_ns: f64,
    /// 95 % confidence interval of the mean, ns.
    pub mean_ci_ns: (f64, f64),
    /// Median, ns.
    pub median_ns: f64,
}

/// Parses one estimates.json.
pub fn parse_estimates(id: &str, json: &str) -> Option<CriterionEstimate> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let point = |k: &str| v.get(k)?.get("point_estimate")?.as_f64();
    let ci = v.get("mean")?.get("confidence_interval")?;
    Some(CriterionEstimate {
        id: id.to_string(),
        mean_ns: point("mean")?,
        mean_ci_ns: (
            ci.get("lower_bound")?.as_f64()?,
            ci.get("upper_bound")?.as_f64()?,
        ),
        median_ns: point("median")?,
    })
}

/// Every `<id>/new/estimates.json` under `dir` (the id read from the sibling
/// benchmark.json's `full_id`, else the relative path), sorted by id.
pub fn gather(dir: &Path) -> Vec<CriterionEstimate> {
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<CriterionEstimate>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|n| n == "new") {
            let Ok(json) = std::fs::read_to_string(path.join("estimates.json")) else {
                continue;
            };
            let id = std::fs::read_to_string(path.join("benchmark.json"))
                .ok()
                .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
                .and_then(|b| b.get("full_id")?.as_str().map(str::to_string))
                .unwrap_or_else(|| dir.strip_prefix(root).unwrap_or(dir).display().to_string());
            out.extend(parse_estimates(&id, &json));
        } else if path.file_name().is_some_and(|n| n != "report") {
            walk(root, &path, out);
        }
    }
}

/// A duration in ns printed with a fitting unit.
pub fn human_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EST: &str = r#"{"mean":{"confidence_interval":{"confidence_level":0.95,"lower_bound":90.0,"upper_bound":110.0},"point_estimate":100.0,"standard_error":1.0},
        "median":{"confidence_interval":{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":2.0},"point_estimate":98.0,"standard_error":1.0}}"#;

    #[test]
    fn parses_and_gathers() {
        let e = parse_estimates("x", EST).unwrap();
        assert_eq!(
            (e.mean_ns, e.mean_ci_ns, e.median_ns),
            (100.0, (90.0, 110.0), 98.0)
        );
        assert!(parse_estimates("x", "{}").is_none());

        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("ipam/alloc/new");
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(new.join("estimates.json"), EST).unwrap();
        std::fs::create_dir_all(dir.path().join("api/cfg/new")).unwrap();
        std::fs::write(dir.path().join("api/cfg/new/estimates.json"), EST).unwrap();
        std::fs::write(
            dir.path().join("api/cfg/new/benchmark.json"),
            r#"{"full_id":"api/config"}"#,
        )
        .unwrap();
        let ids: Vec<String> = gather(dir.path()).into_iter().map(|e| e.id).collect();
        assert_eq!(
            ids,
            vec!["api/config".to_string(), "ipam/alloc".to_string()]
        );
    }

    #[test]
    fn human_units() {
        assert_eq!(human_ns(570.0), "570 ns");
        assert_eq!(human_ns(7_200_000.0), "7.20 ms");
        assert_eq!(human_ns(1500.0), "1.50 µs");
    }
}
