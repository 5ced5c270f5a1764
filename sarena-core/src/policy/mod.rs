//! NetworkPolicy: the engine that turns pods, namespaces, policies and
//! Service addresses into what the dataplane enforces (identities, an
//! address → identity table, per-endpoint allow entries), and the
//! explanation of any decision from that same compiled state.
//!
//! - `model.rs`: the policy model ([`Policy`], [`PolicyPod`], selectors);
//! - `events.rs`: [`PolicyEvent`], what the adapters tell the engine;
//! - `compiled.rs`: [`CompiledPolicy`], the engine's output.

mod compiled;
mod events;
mod model;

pub use compiled::*;
pub use events::*;
pub use model::*;
