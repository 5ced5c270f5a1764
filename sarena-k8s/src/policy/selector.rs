//! Label selectors: `meta/v1` `LabelSelector` → [`LabelSelector`], refusing
//! anything whose meaning is not certain (an unknown operator, `In`/`NotIn`
//! without values, `Exists`/`DoesNotExist` with values). The caller decides
//! what a refused selector means (for a peer: nothing; for a policy's
//! `podSelector`: every pod of its namespace).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use sarena_core::policy::{LabelSelector, Operator, Requirement};

/// Why a selector cannot be read: the field under the selector and the problem.
pub type Unreadable = (String, String);

/// The selector `s`, or the first of its parts that cannot be read
/// (a path relative to the selector, and why).
pub fn label_selector(s: &meta::LabelSelector) -> Result<LabelSelector, Unreadable> {
    let match_labels = s.match_labels.clone().unwrap_or_default();
    if let Some(key) = match_labels.keys().find(|k| k.is_empty()) {
        return Err((
            format!("matchLabels[{key:?}]"),
            "an empty label key".to_owned(),
        ));
    }
    let match_expressions = s
        .match_expressions
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| requirement(r).map_err(|why| (format!("matchExpressions[{i}]"), why)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LabelSelector {
        match_labels,
        match_expressions,
    })
}

fn requirement(r: &meta::LabelSelectorRequirement) -> Result<Requirement, String> {
    if r.key.is_empty() {
        return Err("an empty key".to_owned());
    }
    let values: BTreeSet<String> = r.values.iter().flatten().cloned().collect();
    let op = match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => {
            return Err(format!("operator {} without values", r.operator));
        }
        "In" => Operator::In(values),
        "NotIn" => Operator::NotIn(values),
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            return Err(format!("operator {} with values", r.operator));
        }
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        other => return Err(format!("unknown operator {other:?}")),
    };
    Ok(Requirement {
        key: r.key.clone(),
        op,
    })
}

/// A selector no labels satisfy (`In` with no values): the peer of a rule
/// whose every peer or every port was unreadable, so it allows nothing
/// while keeping its place (rule indices name rules in explanations).
pub fn nothing() -> LabelSelector {
    LabelSelector {
        match_labels: Default::default(),
        match_expressions: vec![Requirement {
            key: "policy.sarena.io/unreadable".to_owned(),
            op: Operator::In(BTreeSet::new()),
        }],
    }
}

#[cfg(test)]
mod tests {
    use sarena_core::api::Labels;

    use super::*;

    fn parse(json: serde_json::Value) -> Result<LabelSelector, Unreadable> {
        label_selector(&serde_json::from_value(json).unwrap())
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_four_operators_are_read_with_their_meaning() {
        let s = parse(serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "team", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"}
            ]
        }))
        .unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "b"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "c"), ("team", "x")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "a"),
            ("team", "x"),
            ("env", "prod")
        ])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "a")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "a"),
            ("team", "x"),
            ("legacy", "")
        ])));
        assert!(
            parse(serde_json::json!({}))
                .unwrap()
                .matches(&Labels::new())
        );
    }

    #[test]
    fn doubtful_requirements_are_refused_with_their_place() {
        for (bad, why) in [
            (
                serde_json::json!({"key": "a", "operator": "Matches", "values": ["x"]}),
                "unknown operator",
            ),
            (
                serde_json::json!({"key": "a", "operator": "NotIn", "values": []}),
                "without values",
            ),
            (
                serde_json::json!({"key": "a", "operator": "In"}),
                "without values",
            ),
            (
                serde_json::json!({"key": "a", "operator": "Exists", "values": ["x"]}),
                "with values",
            ),
            (
                serde_json::json!({"key": "", "operator": "Exists"}),
                "empty key",
            ),
        ] {
            let (field, problem) = parse(serde_json::json!({
                "matchExpressions": [{"key": "ok", "operator": "Exists"}, bad]
            }))
            .unwrap_err();
            assert_eq!(field, "matchExpressions[1]");
            assert!(problem.contains(why), "{problem}");
        }
    }

    #[test]
    fn nothing_selects_nothing() {
        assert!(!nothing().matches(&Labels::new()));
        assert!(!nothing().matches(&labels(&[("policy.sarena.io/unreadable", "")])));
    }
}
