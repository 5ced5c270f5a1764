//! Pool configuration ([`PoolConfig`]) and its compiled form ([`Pool`], [`PoolCidr`]).

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::interval::FreeSet;

/// A pool setting the allocator cannot use. It names the field (e.g.
/// `ipam.pools[1].reserved[0]`), the value as written and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pool configuration: {field} = {value}: {reason}")]
pub struct PoolConfigError {
    /// The field, e.g. `ipam.pools[1].reserved[0]`.
    pub field: String,
    /// The offending value as written.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

impl PoolConfigError {
    /// The error for `field` = `value`.
    pub fn new(
        field: impl Into<String>,
        value: impl std::fmt::Display,
        reason: impl Into<String>,
    ) -> Self {
        PoolConfigError {
            field: field.into(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// The `[ipam]` section: the address pools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpamConfig {
    /// `[[ipam.pools]]`.
    pub pools: Vec<PoolConfig>,
}

/// One `[[ipam.pools]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Unique name.
    pub name: String,
    /// IPv4 and/or IPv6 networks (canonical: no host bits). One address per family is allocated.
    pub cidrs: Vec<IpNet>,
    /// Gateway of each CIDR (at most one per CIDR; default: its first usable address).
    #[serde(default)]
    pub gateways: Vec<IpAddr>,
    /// Never handed out: CIDRs (`10.0.0.0/28`), single addresses or ranges (`10.0.0.5-10.0.0.9`).
    #[serde(default)]
    pub reserved: Vec<String>,
    /// Kubernetes namespaces served; empty for the (single) default pool.
    #[serde(default)]
    pub namespaces: Vec<String>,
}

/// Why an address of a CIDR can never be handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unusable {
    /// The network address (IPv4) or subnet-router anycast address (IPv6).
    Network,
    /// The IPv4 broadcast address.
    Broadcast,
    /// The CIDR's gateway.
    Gateway,
    /// In a reserved range.
    Reserved,
}

impl Unusable {
    /// A word for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Unusable::Network => "the network address",
            Unusable::Broadcast => "the broadcast address",
            Unusable::Gateway => "the gateway",
            Unusable::Reserved => "reserved",
        }
    }
}

/// One CIDR of a pool with its free addresses.
#[derive(Debug, Clone)]
pub struct PoolCidr {
    /// The network.
    pub net: IpNet,
    /// Its gateway.
    pub gateway: IpAddr,
    base: u128,
    last: u128,
    lo: u128,
    hi: u128,
    gateway_off: u128,
    reserved: Vec<(u128, u128)>,
    capacity: u128,
    pub(super) free: FreeSet,
}

/// A compiled pool.
#[derive(Debug, Clone)]
pub struct Pool {
    /// Name.
    pub name: String,
    /// Namespaces served (empty: default pool).
    pub namespaces: Vec<String>,
    /// Its CIDRs, in configuration order.
    pub cidrs: Vec<PoolCidr>,
}

/// An address as a `u128` (IPv4 in the low 32 bits).
pub(super) fn addr_bits(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

impl PoolCidr {
    fn new(net: IpNet, field: &str) -> Result<PoolCidr, PoolConfigError> {
        if net.trunc() != net {
            return Err(PoolConfigError::new(
                field,
                net,
                format!("has host bits set (did you mean {}?)", net.trunc()),
            ));
        }
        let host_bits = u32::from(net.max_prefix_len() - net.prefix_len());
        let last = if host_bits == 0 {
            0
        } else {
            u128::MAX >> (128 - host_bits)
        };
        let (lo, hi) = match net {
            // RFC 3021: /31 and /32 have no network or broadcast address.
            IpNet::V4(_) if host_bits <= 1 => (0, last),
            IpNet::V4(_) => (1, last - 1),
            IpNet::V6(_) if host_bits == 0 => (0, 0),
            IpNet::V6(_) => (1, last),
        };
        let base = addr_bits(net.network());
        Ok(PoolCidr {
            net,
            gateway: net.network(),
            base,
            last,
            lo,
            hi,
            gateway_off: lo,
            reserved: Vec::new(),
            capacity: 0,
            free: FreeSet::new(lo, hi),
        })
    }

    /// The offset of `addr` in this CIDR, if it is inside.
    pub fn offset(&self, addr: IpAddr) -> Option<u128> {
        if !self.net.contains(&addr) {
            return None;
        }
        Some(addr_bits(addr) - self.base)
    }

    /// The address at `off` (which must be inside).
    pub fn address(&self, off: u128) -> IpAddr {
        let bits = self.base + off;
        match self.net {
            // Truncation is exact: an IPv4 CIDR's base + offset fits 32 bits.
            IpNet::V4(_) => IpAddr::V4((bits as u32).into()),
            IpNet::V6(_) => IpAddr::V6(bits.into()),
        }
    }

    /// `Some(reason)` when the address at `off` can never be handed out.
    pub fn unusable(&self, off: u128) -> Option<Unusable> {
        if off < self.lo {
            Some(Unusable::Network)
        } else if off > self.hi {
            Some(Unusable::Broadcast)
        } else if off == self.gateway_off {
            Some(Unusable::Gateway)
        } else if self.reserved.iter().any(|&(a, b)| a <= off && off <= b) {
            Some(Unusable::Reserved)
        } else {
            None
        }
    }

    /// Addresses this CIDR can hand out in all.
    pub fn capacity(&self) -> u128 {
        self.capacity
    }

    /// Addresses currently free.
    pub fn free_count(&self) -> u128 {
        self.free.free_count()
    }

    fn set_gateway(&mut self, gw: IpAddr, field: &str) -> Result<(), PoolConfigError> {
        let Some(off) = self.offset(gw) else {
            return Err(PoolConfigError::new(
                field,
                gw,
                "lies outside every cidr of the pool",
            ));
        };
        if let Some(why) = self.unusable(off).filter(|u| *u != Unusable::Gateway) {
            return Err(PoolConfigError::new(
                field,
                gw,
                format!("is {}", why.as_str()),
            ));
        }
        self.gateway = gw;
        self.gateway_off = off;
        Ok(())
    }

    fn finish(&mut self) {
        self.gateway = self.address(self.gateway_off);
        let mut free = FreeSet::new(self.lo, self.hi);
        free.remove_range(self.gateway_off, self.gateway_off);
        for &(a, b) in &self.reserved {
            free.remove_range(a, b);
        }
        self.capacity = free.free_count();
        self.free = free;
    }
}

/// Parses one `reserved` entry into an inclusive address range.
fn parse_reserved(text: &str, field: &str) -> Result<(IpAddr, IpAddr), PoolConfigError> {
    let text = text.trim();
    if let Some((a, b)) = text.split_once('-') {
        let parse = |s: &str| {
            s.trim().parse::<IpAddr>().map_err(|_| {
                PoolConfigError::new(field, text, format!("{:?} is not an IP address", s.trim()))
            })
        };
        let (a, b) = (parse(a)?, parse(b)?);
        if a.is_ipv4() != b.is_ipv4() {
            return Err(PoolConfigError::new(
                field,
                text,
                "range mixes IPv4 and IPv6",
            ));
        }
        if addr_bits(a) > addr_bits(b) {
            return Err(PoolConfigError::new(
                field,
                text,
                "range start is after its end",
            ));
        }
        return Ok((a, b));
    }
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok((net.network(), net.broadcast()));
    }
    match text.parse::<IpAddr>() {
        Ok(a) => Ok((a, a)),
        Err(_) => Err(PoolConfigError::new(
            field,
            text,
            "expected a CIDR, an address or a-b range",
        )),
    }
}

impl Pool {
    /// Compiles and validates `ipam.pools[index]`.
    pub fn new(cfg: &PoolConfig, index: usize) -> Result<Pool, PoolConfigError> {
        let at = format!("ipam.pools[{index}]");
        if cfg.name.trim().is_empty() {
            return Err(PoolConfigError::new(
                format!("{at}.name"),
                "\"\"",
                "must not be empty",
            ));
        }
        if cfg.cidrs.is_empty() {
            return Err(PoolConfigError::new(
                format!("{at}.cidrs"),
                "[]",
                "needs at least one CIDR",
            ));
        }
        let mut cidrs = Vec::with_capacity(cfg.cidrs.len());
        for (i, &net) in cfg.cidrs.iter().enumerate() {
            let field = format!("{at}.cidrs[{i}]");
            if let Some(prev) = cidrs.iter().find(|c: &&PoolCidr| overlaps(c.net, net)) {
                return Err(PoolConfigError::new(
                    field,
                    net,
                    format!("overlaps {}", prev.net),
                ));
            }
            cidrs.push(PoolCidr::new(net, &field)?);
        }
        let mut gateway_set = vec![false; cidrs.len()];
        for (i, &gw) in cfg.gateways.iter().enumerate() {
            let field = format!("{at}.gateways[{i}]");
            let Some(ci) = cidrs.iter().position(|c| c.net.contains(&gw)) else {
                return Err(PoolConfigError::new(
                    field,
                    gw,
                    "lies outside every cidr of the pool",
                ));
            };
            if std::mem::replace(&mut gateway_set[ci], true) {
                let msg = format!("a second gateway for {}", cidrs[ci].net);
                return Err(PoolConfigError::new(field, gw, msg));
            }
            cidrs[ci].set_gateway(gw, &field)?;
        }
        for (i, text) in cfg.reserved.iter().enumerate() {
            let field = format!("{at}.reserved[{i}]");
            let (first, end) = parse_reserved(text, &field)?;
            let (a, b) = (addr_bits(first), addr_bits(end));
            let mut hit = false;
            for c in cidrs
                .iter_mut()
                .filter(|c| c.net.network().is_ipv4() == first.is_ipv4())
            {
                let (lo, hi) = (c.base, c.base + c.last);
                if a <= hi && b >= lo {
                    c.reserved.push((a.max(lo) - c.base, b.min(hi) - c.base));
                    hit = true;
                }
            }
            if !hit {
                return Err(PoolConfigError::new(
                    field,
                    text,
                    "lies outside every cidr of the pool",
                ));
            }
        }
        for (i, c) in cidrs.iter_mut().enumerate() {
            c.finish();
            if c.capacity == 0 {
                let field = format!("{at}.cidrs[{i}]");
                return Err(PoolConfigError::new(
                    field,
                    c.net,
                    "leaves no address to hand out",
                ));
            }
        }
        for (i, ns) in cfg.namespaces.iter().enumerate() {
            if ns.trim().is_empty() {
                let field = format!("{at}.namespaces[{i}]");
                return Err(PoolConfigError::new(field, "\"\"", "must not be empty"));
            }
        }
        Ok(Pool {
            name: cfg.name.clone(),
            namespaces: cfg.namespaces.clone(),
            cidrs,
        })
    }

    /// True for the default pool (no namespaces).
    pub fn is_default(&self) -> bool {
        self.namespaces.is_empty()
    }
}

/// True when two networks share an address.
pub(super) fn overlaps(a: IpNet, b: IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}
