//! NetworkPolicy: the engine that turns pods, namespaces, policies and
//! Service addresses into what the dataplane enforces (identities, an
//! address → identity table, per-endpoint allow entries), and the
//! explanation of any decision from that same compiled state.
//!
//! - `model.rs`: the policy model ([`Policy`], [`PolicyPod`], selectors);
//! - `events.rs`: [`PolicyEvent`], what the adapters tell the engine;
//! - `compiled.rs`: [`CompiledPolicy`], the engine's output;
//! - `engine.rs`: [`PolicyEngine`], events in, compiled policy out;
//! - `decide.rs`: [`CompiledPolicy::decide`], the programs' lookups;
//! - `explain.rs`: [`PolicyEngine::explain`], a decision end to end;
//! - helpers: `objects.rs` (what the engine was told, relists, address
//!   claims), `identities.rs` (identity allocation), `rule_ids.rs`,
//!   `prefixes.rs`, `ports.rs` (port ranges, named ports), `context.rs`
//!   (one compile's state, the ipcache, rule peers), `endpoint.rs` (one
//!   endpoint's entries).

mod compiled;
mod context;
mod decide;
mod endpoint;
mod engine;
mod events;
mod explain;
mod identities;
mod model;
mod objects;
mod ports;
mod prefixes;
mod rule_ids;

#[cfg(test)]
mod address_tests;
#[cfg(test)]
mod engine_test_support;
#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod explain_tests;
#[cfg(test)]
mod model_gen;
#[cfg(test)]
mod model_tests;

pub use compiled::*;
pub use engine::*;
pub use events::*;
pub use explain::*;
pub use model::*;
pub use ports::{PortPrefix, port_prefixes};
