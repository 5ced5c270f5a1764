//! The Grafana dashboard (deploy/grafana/sarena-dashboard.json) against what
//! the daemon really exports: every metric a panel or a template variable
//! queries must be a family of a scrape rendered over a fully populated
//! node (tests.rs's, in Kubernetes mode with the eBPF dataplane), parsed
//! back with `prometheus-parse`.

use std::collections::{BTreeMap, BTreeSet};

use prometheus_parse::{LineInfo, SampleType};
use sarena_core::api::{DeleteQueueStatus, Inspect, KubernetesStatus, MockNodeApi};
use serde_json::Value as Json;

use super::tests::{daemon, parse};
use super::*;

const DASHBOARD: &str = include_str!("../../../deploy/grafana/sarena-dashboard.json");

/// The samples a histogram family `x` adds to its name (`x_bucket`, ...).
const HISTOGRAM_SUFFIXES: [&str; 3] = ["_bucket", "_sum", "_count"];

/// The datasource every panel and target must use: the dashboard's variable.
const DATASOURCE: &str = "${datasource}";

/// The metric families of one scrape, as named on the wire (counters with
/// their `_total`), and which of them are histograms.
struct Exported {
    families: BTreeSet<String>,
    histograms: BTreeSet<String>,
}

impl Exported {
    /// The family `name` belongs to: a histogram's `_bucket`, `_sum` and
    /// `_count` samples belong to the histogram, anything else is its own.
    fn family<'a>(&self, name: &'a str) -> &'a str {
        HISTOGRAM_SUFFIXES
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|base| self.histograms.contains(*base))
            })
            .unwrap_or(name)
    }

    fn has(&self, name: &str) -> bool {
        self.families.contains(self.family(name))
    }
}

/// Every family the daemon can export, each with at least one sample: the
/// status and counters of tests.rs's node, with the parts it leaves out
/// (Kubernetes mode, the deletion queue) filled in, and one of each thing
/// the daemon records as it happens.
async fn exported() -> Exported {
    let node = daemon();
    let mut status = node.status().await.unwrap();
    status.kubernetes = Some(KubernetesStatus {
        node_name: "node-a".into(),
        pod_cidrs: vec!["10.1.0.0/24".parse().unwrap()],
    });
    status.delete_queue = Some(DeleteQueueStatus {
        dir: "/var/lib/sarena/delete-queue".into(),
        pending: 1,
    });
    let stats = node.endpoint_stats().await.unwrap();
    let mut node = MockNodeApi::new();
    node.expect_status().returning(move || Ok(status.clone()));
    node.expect_endpoint_stats()
        .returning(move || Ok(stats.clone()));

    let metrics = Metrics::new(DEFAULT_ENDPOINT_LIMIT);
    metrics.observe(
        &Method::GET,
        "/v1/daemon/status",
        StatusCode::OK,
        Duration::from_millis(2),
    );
    metrics.operation::<()>("allocate", &Ok(()), false);
    metrics.replay(&ReplayReport::default());
    metrics.reconcile(&ReconcileReport::default());
    metrics.policy().compiled(2, 1, 1, Duration::from_millis(3));
    metrics.policy().apply_failed();
    metrics.policy().map_full("SARENA_POLICY");
    let text = metrics.render(&node).await.unwrap();

    let families: BTreeSet<String> = parse(&text).docs.into_keys().collect();
    let histograms = text
        .lines()
        .filter_map(|line| match LineInfo::parse(line) {
            LineInfo::Type {
                metric_alias: Some(name),
                sample_type: SampleType::Histogram,
                ..
            } => Some(name),
            _ => None,
        })
        .collect();
    assert!(
        families.contains("sarena_ready") && families.contains("sarena_operations_total"),
        "not a scrape of the daemon:\n{text}"
    );
    Exported {
        families,
        histograms,
    }
}

/// Every panel of `panels`, those of rows (collapsed rows hold theirs) included.
fn all_panels(panels: &Json) -> Vec<&Json> {
    let mut all = Vec::new();
    for panel in panels.as_array().into_iter().flatten() {
        all.push(panel);
        if let Some(nested) = panel.get("panels") {
            all.extend(all_panels(nested));
        }
    }
    all
}

fn dashboard() -> Json {
    serde_json::from_str(DASHBOARD).unwrap()
}

fn is_row(panel: &Json) -> bool {
    panel["type"] == "row"
}

fn title(panel: &Json) -> &str {
    panel["title"].as_str().unwrap_or("(untitled)")
}

fn exprs(panel: &Json) -> Vec<&str> {
    panel["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["expr"].as_str())
        .collect()
}

/// The identifiers `sarena_[a-z0-9_]+` of a PromQL expression.
fn metric_names(expr: &str) -> Vec<&str> {
    const PREFIX: &str = "sarena_";
    let bytes = expr.as_bytes();
    let mut names = Vec::new();
    let mut from = 0;
    while let Some(at) = expr[from..].find(PREFIX) {
        let start = from + at;
        let mut end = start + PREFIX.len();
        while end < bytes.len() && matches!(bytes[end], b'a'..=b'z' | b'0'..=b'9' | b'_') {
            end += 1;
        }
        let inside_a_word = start > 0
            && (bytes[start - 1].is_ascii_alphanumeric()
                || matches!(bytes[start - 1], b'_' | b':'));
        if !inside_a_word && end > start + PREFIX.len() {
            names.push(&expr[start..end]);
        }
        from = end;
    }
    names
}

#[tokio::test]
async fn every_metric_the_dashboard_queries_is_exported() {
    let exported = exported().await;
    let dashboard = dashboard();
    // Where each unknown name is used: panel titles and variable names.
    let mut unknown: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut checked = 0;
    for panel in all_panels(&dashboard["panels"]) {
        for expr in exprs(panel) {
            for name in metric_names(expr) {
                checked += 1;
                if !exported.has(name) {
                    let at = format!("panel {:?}", title(panel));
                    unknown.entry(name).or_default().push(at);
                }
            }
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = &variable["query"];
        let query = query.as_str().or_else(|| query["query"].as_str());
        for name in query.map(metric_names).unwrap_or_default() {
            checked += 1;
            if !exported.has(name) {
                let at = format!("variable {:?}", variable["name"].as_str().unwrap_or("?"));
                unknown.entry(name).or_default().push(at);
            }
        }
    }
    assert!(checked > 0, "the dashboard queries no sarena_ metric");
    let lines: Vec<String> = unknown
        .iter()
        .map(|(name, used)| format!("  {name}: {}", used.join(", ")))
        .collect();
    assert!(
        unknown.is_empty(),
        "the dashboard queries {} metric(s) the daemon does not export: {:?}\n{}",
        unknown.len(),
        unknown.keys().collect::<Vec<_>>(),
        lines.join("\n")
    );
}

#[test]
fn every_panel_queries_the_datasource_variable_for_the_selected_instances() {
    let dashboard = dashboard();
    assert_eq!(dashboard["uid"], "sarena-node");
    assert_eq!(dashboard["title"], "Sarena");
    assert!(dashboard["schemaVersion"].as_u64() >= Some(38));
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no variable {name}"))
    };
    assert_eq!(
        (
            variable("datasource")["type"].as_str(),
            variable("datasource")["query"].as_str()
        ),
        (Some("datasource"), Some("prometheus"))
    );
    let instance = variable("instance");
    assert_eq!(instance["datasource"]["uid"], DATASOURCE);
    assert_eq!(
        (&instance["multi"], &instance["includeAll"]),
        (&Json::Bool(true), &Json::Bool(true))
    );

    let panels = all_panels(&dashboard["panels"]);
    assert!(!panels.is_empty());
    let mut ids = BTreeSet::new();
    let mut problems = Vec::new();
    for panel in &panels {
        let title = title(panel);
        match panel["id"].as_u64() {
            Some(id) if !ids.insert(id) => problems.push(format!("{title:?}: id {id} used twice")),
            Some(_) => {}
            None => problems.push(format!("{title:?}: no id")),
        }
        if is_row(panel) {
            continue;
        }
        if panel["datasource"]["uid"] != DATASOURCE {
            problems.push(format!("{title:?}: datasource {}", panel["datasource"]));
        }
        let targets = panel["targets"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if !exprs(panel).iter().any(|e| !e.trim().is_empty()) {
            problems.push(format!("{title:?}: no target with an expr"));
        }
        for target in targets {
            if target["datasource"]["uid"] != DATASOURCE {
                problems.push(format!(
                    "{title:?}: a target's datasource {}",
                    target["datasource"]
                ));
            }
            let expr = target["expr"].as_str().unwrap_or_default();
            if !expr.is_empty() && !expr.contains(r#"instance=~"$instance""#) {
                problems.push(format!("{title:?}: {expr} ignores $instance"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn names_are_found_in_expressions_and_rows() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (le) (rate(sarena_a_bucket{x="sarena_b"}[5m]))) / my_sarena_c + sarena_d:e"#
        ),
        ["sarena_a_bucket", "sarena_b", "sarena_d"]
    );
    let exported = Exported {
        families: ["sarena_h".to_owned(), "sarena_c_count".to_owned()].into(),
        histograms: ["sarena_h".to_owned()].into(),
    };
    assert!(exported.has("sarena_h_bucket") && exported.has("sarena_h_sum"));
    assert!(exported.has("sarena_c_count") && !exported.has("sarena_c"));
    let nested = serde_json::json!([
        {"id": 1, "type": "row", "collapsed": true, "panels": [{"id": 2, "title": "inner"}]},
        {"id": 3, "title": "outer"}
    ]);
    let ids: Vec<u64> = all_panels(&nested)
        .iter()
        .filter_map(|p| p["id"].as_u64())
        .collect();
    assert_eq!(ids, [1, 2, 3]);
}
