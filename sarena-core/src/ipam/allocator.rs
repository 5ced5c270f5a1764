//! [`Allocator`]: picks pools and hands out / takes back addresses, in memory.

use std::collections::HashSet;
use std::net::IpAddr;

use ipnet::IpNet;

use super::pool::{IpamConfig, Pool, PoolConfigError, Unusable, overlaps};
use crate::api::{AllocatedAddress, PoolState};

/// IPAM errors (address-level; ownership is the caller's business).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpamError {
    /// A pool was asked for by name and does not exist.
    #[error("no pool named {pool:?}")]
    UnknownPool {
        /// The name asked for.
        pool: String,
    },
    /// No free address of a family the pool serves.
    #[error("pool {pool:?} has no free {family} address")]
    Exhausted {
        /// The pool.
        pool: String,
        /// `IPv4` or `IPv6`.
        family: &'static str,
    },
    /// A requested address is in no pool.
    #[error("requested address {address} is in no pool")]
    OutsidePools {
        /// The address.
        address: IpAddr,
    },
    /// A requested address is not in the pool chosen for the request.
    #[error("requested address {address} is not in pool {pool:?}")]
    NotInPool {
        /// The address.
        address: IpAddr,
        /// The pool.
        pool: String,
    },
    /// A requested address can never be handed out.
    #[error("requested address {address} is {reason} of pool {pool:?}")]
    Unusable {
        /// The address.
        address: IpAddr,
        /// The pool.
        pool: String,
        /// Why (`the gateway`, `reserved`, ...).
        reason: &'static str,
    },
    /// A requested address is already handed out.
    #[error("address {address} is already allocated")]
    InUse {
        /// The address.
        address: IpAddr,
    },
    /// Two requested addresses of the same family.
    #[error("requested addresses {first} and {second} are of the same family; one per family")]
    DuplicateFamily {
        /// The first.
        first: IpAddr,
        /// The second.
        second: IpAddr,
    },
}

/// The in-memory allocator: compiled pools with their free-interval sets.
///
/// It knows which addresses are free, not who owns the others; callers keep
/// ownership (and durability) themselves. Every operation is `O(log n)` in the
/// number of free intervals of the CIDRs touched.
///
/// ```
/// use sarena_core::ipam::Allocator;
/// use sarena_core::node::NodeConfig;
/// let mut alloc = Allocator::new(&NodeConfig::default().ipam)?;
/// let pool = alloc.select_pool(None, Some("kube-system"), &[])?.to_owned();
/// let got = alloc.allocate(&pool, &[])?;
/// assert_eq!(got[0].address.to_string(), "10.200.0.2/16");
/// assert!(alloc.release(got[0].address.addr()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Allocator {
    pools: Vec<Pool>,
}

impl Allocator {
    /// Compiles and validates the pools (names unique, exactly one default pool, no
    /// namespace in two pools, no CIDR in two pools).
    pub fn new(cfg: &IpamConfig) -> Result<Allocator, PoolConfigError> {
        if cfg.pools.is_empty() {
            return Err(PoolConfigError::new(
                "ipam.pools",
                "[]",
                "needs at least one pool",
            ));
        }
        let mut pools: Vec<Pool> = Vec::with_capacity(cfg.pools.len());
        let mut namespaces = HashSet::new();
        for (i, pc) in cfg.pools.iter().enumerate() {
            let pool = Pool::new(pc, i)?;
            if pools.iter().any(|p| p.name == pool.name) {
                return Err(PoolConfigError::new(
                    format!("ipam.pools[{i}].name"),
                    &pool.name,
                    "is used by another pool",
                ));
            }
            if pool.is_default()
                && let Some(other) = pools.iter().find(|p| p.is_default())
            {
                let msg = format!(
                    "pool {:?} already has no namespaces (is the default)",
                    other.name
                );
                return Err(PoolConfigError::new(
                    format!("ipam.pools[{i}].namespaces"),
                    "[]",
                    msg,
                ));
            }
            for (j, ns) in pool.namespaces.iter().enumerate() {
                if !namespaces.insert(ns.clone()) {
                    return Err(PoolConfigError::new(
                        format!("ipam.pools[{i}].namespaces[{j}]"),
                        ns,
                        "is served by another pool",
                    ));
                }
            }
            for (j, c) in pool.cidrs.iter().enumerate() {
                let clash = pools
                    .iter()
                    .flat_map(|p| &p.cidrs)
                    .find(|o| overlaps(o.net, c.net));
                if let Some(o) = clash {
                    let msg = format!("overlaps {} of another pool", o.net);
                    return Err(PoolConfigError::new(
                        format!("ipam.pools[{i}].cidrs[{j}]"),
                        c.net,
                        msg,
                    ));
                }
            }
            pools.push(pool);
        }
        if !pools.iter().any(Pool::is_default) {
            return Err(PoolConfigError::new(
                "ipam.pools[*].namespaces",
                "(every pool lists namespaces)",
                "exactly one pool must have no namespaces: the default pool",
            ));
        }
        Ok(Allocator { pools })
    }

    /// The compiled pools.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// The pool for a request: the one named, else the one holding the first
    /// requested address, else the one serving `namespace`, else the default pool.
    pub fn select_pool(
        &self,
        name: Option<&str>,
        namespace: Option<&str>,
        requested: &[IpAddr],
    ) -> Result<&str, IpamError> {
        if let Some(name) = name {
            return match self.pools.iter().find(|p| p.name == name) {
                Some(p) => Ok(&p.name),
                None => Err(IpamError::UnknownPool {
                    pool: name.to_owned(),
                }),
            };
        }
        if let Some(&address) = requested.first() {
            return match self.locate(address) {
                Some((pi, _)) => Ok(&self.pools[pi].name),
                None => Err(IpamError::OutsidePools { address }),
            };
        }
        let by_ns = namespace.and_then(|ns| {
            self.pools
                .iter()
                .find(|p| p.namespaces.iter().any(|n| n == ns))
        });
        match by_ns.or_else(|| self.pools.iter().find(|p| p.is_default())) {
            Some(p) => Ok(&p.name),
            // Unreachable for an allocator built by `new`, which demands a default pool.
            None => Err(IpamError::UnknownPool {
                pool: "(default)".to_owned(),
            }),
        }
    }

    /// `(pool index, cidr index)` of the CIDR holding `addr`.
    pub fn locate(&self, addr: IpAddr) -> Option<(usize, usize)> {
        self.pools.iter().enumerate().find_map(|(pi, p)| {
            p.cidrs
                .iter()
                .position(|c| c.net.contains(&addr))
                .map(|ci| (pi, ci))
        })
    }

    /// Hands out one address per family `pool` serves: the requested address of that
    /// family if any (it must be in `pool`, usable and free), else the next free one.
    /// All or nothing: on error nothing stays taken. IPv4 comes first in the answer.
    pub fn allocate(
        &mut self,
        pool: &str,
        requested: &[IpAddr],
    ) -> Result<Vec<AllocatedAddress>, IpamError> {
        let Some(pi) = self.pools.iter().position(|p| p.name == pool) else {
            return Err(IpamError::UnknownPool {
                pool: pool.to_owned(),
            });
        };
        for (i, a) in requested.iter().enumerate() {
            if let Some(b) = requested[..i].iter().find(|b| b.is_ipv4() == a.is_ipv4()) {
                return Err(IpamError::DuplicateFamily {
                    first: *b,
                    second: *a,
                });
            }
        }
        let mut taken: Vec<AllocatedAddress> = Vec::new();
        let result = self.allocate_into(pi, requested, &mut taken);
        if result.is_err() {
            for a in &taken {
                self.release(a.address.addr());
            }
        }
        // IPv4 first, then IPv6, whatever was requested.
        taken.sort_by_key(|a| a.address.addr().is_ipv6());
        result.map(|()| taken)
    }

    fn allocate_into(
        &mut self,
        pi: usize,
        requested: &[IpAddr],
        taken: &mut Vec<AllocatedAddress>,
    ) -> Result<(), IpamError> {
        for &address in requested {
            let Some(ci) = self.pools[pi]
                .cidrs
                .iter()
                .position(|c| c.net.contains(&address))
            else {
                if self.locate(address).is_some() {
                    let pool = self.pools[pi].name.clone();
                    return Err(IpamError::NotInPool { address, pool });
                }
                return Err(IpamError::OutsidePools { address });
            };
            let pool = &mut self.pools[pi];
            let cidr = &mut pool.cidrs[ci];
            let off = cidr.offset(address).unwrap_or_default();
            if let Some(why) = cidr.unusable(off) {
                let pool = pool.name.clone();
                return Err(IpamError::Unusable {
                    address,
                    pool,
                    reason: why.as_str(),
                });
            }
            if !cidr.free.take(off) {
                return Err(IpamError::InUse { address });
            }
            let address = IpNet::new(address, cidr.net.prefix_len()).unwrap_or(cidr.net);
            taken.push(AllocatedAddress {
                address,
                gateway: cidr.gateway,
                pool: pool.name.clone(),
            });
        }
        let pool = &mut self.pools[pi];
        for v4 in [true, false] {
            let serves = pool.cidrs.iter().any(|c| c.net.network().is_ipv4() == v4);
            if !serves || requested.iter().any(|a| a.is_ipv4() == v4) {
                continue;
            }
            let hit = pool
                .cidrs
                .iter_mut()
                .filter(|c| c.net.network().is_ipv4() == v4)
                .find_map(|c| {
                    let off = c.free.take_next()?;
                    Some((c.address(off), c.net.prefix_len(), c.gateway))
                });
            let Some((addr, prefix, gateway)) = hit else {
                let family = if v4 { "IPv4" } else { "IPv6" };
                return Err(IpamError::Exhausted {
                    pool: pool.name.clone(),
                    family,
                });
            };
            let address = IpNet::new(addr, prefix).unwrap_or(IpNet::from(addr));
            taken.push(AllocatedAddress {
                address,
                gateway,
                pool: pool.name.clone(),
            });
        }
        Ok(())
    }

    /// Marks `addr` taken (rebuilding state from the store). Errors when it is in no
    /// pool, unusable under the current configuration, or already taken.
    pub fn mark_allocated(&mut self, addr: IpAddr) -> Result<(), IpamError> {
        let Some((pi, ci)) = self.locate(addr) else {
            return Err(IpamError::OutsidePools { address: addr });
        };
        let pool = &mut self.pools[pi];
        let cidr = &mut pool.cidrs[ci];
        let off = cidr.offset(addr).unwrap_or_default();
        if let Some(why) = cidr.unusable(off) {
            let pool = pool.name.clone();
            return Err(IpamError::Unusable {
                address: addr,
                pool,
                reason: why.as_str(),
            });
        }
        if !cidr.free.take(off) {
            return Err(IpamError::InUse { address: addr });
        }
        Ok(())
    }

    /// Moves the cursor of the CIDR holding `addr` just past it, so dynamic
    /// allocation resumes there (used at start-up with the latest allocations, so a
    /// restart does not hand out recently released addresses first).
    pub fn resume_after(&mut self, addr: IpAddr) {
        if let Some((pi, ci)) = self.locate(addr) {
            let cidr = &mut self.pools[pi].cidrs[ci];
            if let Some(off) = cidr.offset(addr) {
                cidr.free.set_cursor(off.wrapping_add(1));
            }
        }
    }

    /// Gives `addr` back. False when it was free already or is not an address this
    /// allocator hands out (outside the pools, gateway, reserved...).
    pub fn release(&mut self, addr: IpAddr) -> bool {
        let Some((pi, ci)) = self.locate(addr) else {
            return false;
        };
        let cidr = &mut self.pools[pi].cidrs[ci];
        let off = cidr.offset(addr).unwrap_or_default();
        cidr.unusable(off).is_none() && cidr.free.put(off)
    }

    /// True when `addr` is a usable pool address that is currently free.
    pub fn is_free(&self, addr: IpAddr) -> bool {
        self.locate(addr).is_some_and(|(pi, ci)| {
            let cidr = &self.pools[pi].cidrs[ci];
            cidr.offset(addr).is_some_and(|off| cidr.free.contains(off))
        })
    }

    /// Why `addr` can never be handed out, if it is in a pool and cannot.
    pub fn unusable(&self, addr: IpAddr) -> Option<Unusable> {
        let (pi, ci) = self.locate(addr)?;
        let cidr = &self.pools[pi].cidrs[ci];
        cidr.unusable(cidr.offset(addr)?)
    }

    /// One [`PoolState`] per pool CIDR, for operators.
    pub fn pool_states(&self) -> Vec<PoolState> {
        let clamp = |n: u128| u64::try_from(n).unwrap_or(u64::MAX);
        self.pools
            .iter()
            .flat_map(|p| {
                p.cidrs.iter().map(|c| PoolState {
                    name: p.name.clone(),
                    cidr: c.net,
                    gateway: c.gateway,
                    namespaces: p.namespaces.clone(),
                    allocated: clamp(c.capacity() - c.free_count()),
                    capacity: clamp(c.capacity()),
                })
            })
            .collect()
    }
}
