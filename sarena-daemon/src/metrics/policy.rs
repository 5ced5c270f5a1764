//! [`PolicyMetrics`]: NetworkPolicy's series, recorded by the policy hub
//! (Kubernetes mode) as it compiles and applies. Drops by policy are the
//! endpoints' eBPF counters (`sarena_endpoint_drops` with reason
//! `policy_denied_ingress` / `policy_denied_egress`).

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::Labels;

/// NetworkPolicy's series. Cheap to clone (the series are shared).
#[derive(Debug, Clone, Default)]
pub struct PolicyMetrics {
    policies: Gauge,
    isolated: Family<Labels, Gauge>,
    compile: CompileHistogram,
    apply_errors: Counter,
    map_full: Family<Labels, Counter>,
}

/// The compile-time histogram (a newtype for `Default`).
#[derive(Debug, Clone)]
struct CompileHistogram(Histogram);

impl Default for CompileHistogram {
    /// 100 µs to ~6.5 s, doubling.
    fn default() -> Self {
        CompileHistogram(Histogram::new(exponential_buckets(0.0001, 2.0, 17)))
    }
}

impl PolicyMetrics {
    /// Registers the series in `registry`.
    pub fn register(registry: &mut Registry) -> PolicyMetrics {
        let m = PolicyMetrics::default();
        registry.register(
            "sarena_policy_policies",
            "NetworkPolicies the daemon knows (every namespace's)",
            m.policies.clone(),
        );
        registry.register(
            "sarena_policy_endpoints_isolated",
            "Endpoints of this node a NetworkPolicy isolates, by direction (ingress, egress)",
            m.isolated.clone(),
        );
        registry.register(
            "sarena_policy_compile_duration_seconds",
            "Time to compile NetworkPolicy into the dataplane's state",
            m.compile.0.clone(),
        );
        registry.register(
            "sarena_policy_apply_errors",
            "Compiled NetworkPolicy states the dataplane failed to apply",
            m.apply_errors.clone(),
        );
        registry.register(
            "sarena_policy_map_full",
            "Policy updates that found this eBPF map full (its missing entries stay denied)",
            m.map_full.clone(),
        );
        m
    }

    /// A compile: how many policies are known, how many endpoints each
    /// direction isolates, how long it took.
    pub fn compiled(&self, policies: usize, ingress: usize, egress: usize, took: Duration) {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.policies.set(gauge(policies));
        for (direction, n) in [("ingress", ingress), ("egress", egress)] {
            self.isolated
                .get_or_create(&vec![("direction", direction.to_owned())])
                .set(gauge(n));
        }
        self.compile.0.observe(took.as_secs_f64());
    }

    /// The dataplane refused or failed a compiled state.
    pub fn apply_failed(&self) {
        self.apply_errors.inc();
    }

    /// A policy update found `map` full.
    pub fn map_full(&self, map: &str) {
        self.map_full
            .get_or_create(&vec![("map", map.to_owned())])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::prometheus_text::encode;

    use super::*;

    #[test]
    fn a_compile_and_a_failed_apply_show_in_the_series() {
        let mut registry = Registry::default();
        let m = PolicyMetrics::register(&mut registry);
        m.compiled(3, 2, 1, Duration::from_millis(4));
        m.apply_failed();
        m.map_full("SARENA_POLICY");
        let mut out = String::new();
        encode(&mut out, &registry).unwrap();
        for line in [
            "sarena_policy_policies 3",
            "sarena_policy_endpoints_isolated{direction=\"ingress\"} 2",
            "sarena_policy_endpoints_isolated{direction=\"egress\"} 1",
            "sarena_policy_compile_duration_seconds_count 1",
            "sarena_policy_apply_errors_total 1",
            "sarena_policy_map_full_total{map=\"SARENA_POLICY\"} 1",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} missing in\n{out}");
        }
    }
}
