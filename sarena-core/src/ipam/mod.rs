//! IP address management: pools from the configuration, and an allocator that
//! hands out one address per family without ever scanning a range.
//!
//! - [`IpamConfig`] / [`PoolConfig`]: the `[[ipam.pools]]` configuration.
//! - [`Allocator`]: compiled [`Pool`]s with a [`FreeSet`] of free offsets per CIDR.
//!
//! Ownership and durability live one level up, in [`crate::node::Registry`].

mod allocator;
#[cfg(test)]
mod dual_stack_tests;
mod interval;
mod pool;
#[cfg(test)]
mod tests;

pub use allocator::{Allocator, IpamError};
pub use interval::FreeSet;
pub use pool::{IpamConfig, Pool, PoolCidr, PoolConfig, PoolConfigError, Unusable};
