//! NetworkPolicy's adapters: API objects → `sarena_core::policy` and the
//! watches that feed the policy engine.
//!
//! - `network_policy.rs`: [`network_policy`], a NetworkPolicy as a
//!   [`sarena_core::policy::Policy`], never failing open;
//! - `selector.rs`: label selectors;
//! - `objects.rs`: Pods, Namespaces and Services as policy sees them;
//! - `warning.rs`: [`Warning`], what a conversion dropped;
//! - `watch.rs`: [`watch_policy`], every Pod, Namespace, NetworkPolicy and
//!   Service as [`sarena_core::policy::PolicyEvent`]s.

mod network_policy;
mod objects;
mod selector;
mod warning;
mod watch;

pub use network_policy::{is_port_name, network_policy};
pub use objects::{policy_namespace, policy_pod, service_addresses};
pub use selector::label_selector;
pub use warning::Warning;
pub use watch::watch_policy;
