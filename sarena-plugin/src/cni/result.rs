//! The typed CNI 1.x success result, and its rendering in older versions.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::{CniError, ErrorCode};
use super::version::{Version, truncate};

/// A CNI 1.x success result (ADD's output, CHECK's `prevResult`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniResult {
    /// Interfaces the plugin created: Sarena's host end at index 0, pod end at index 1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    /// Addresses assigned, each pointing at an interface by index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<IpConfig>,
    /// Routes installed in the pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// DNS settings (Sarena leaves these empty; kubelet sets DNS itself).
    /// Left out of the JSON when empty.
    #[serde(default, skip_serializing_if = "Dns::is_empty")]
    pub dns: Dns,
}

/// One interface of a result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    /// Interface name.
    pub name: String,
    /// Hardware address, `aa:bb:cc:dd:ee:ff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// MTU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// The netns path for interfaces inside the container; absent for host interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// vhost-user / similar socket path.
    #[serde(
        default,
        rename = "socketPath",
        skip_serializing_if = "Option::is_none"
    )]
    pub socket_path: Option<String>,
    /// PCI id of a device-backed interface.
    #[serde(default, rename = "pciID", skip_serializing_if = "Option::is_none")]
    pub pci_id: Option<String>,
}

/// One address of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpConfig {
    /// Address with prefix length, e.g. `10.0.10.30/24`.
    pub address: IpNet,
    /// The default gateway for this address, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Index into [`CniResult::interfaces`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
}

/// One route of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// Destination.
    pub dst: IpNet,
    /// Next hop; absent for on-link routes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<IpAddr>,
    /// Route MTU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Advertised MSS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advmss: Option<u32>,
    /// Route priority (metric).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// Routing table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    /// Route scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<u8>,
}

/// DNS settings of a result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dns {
    /// Name servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// Local domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
    /// resolv.conf options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl Dns {
    /// True when no DNS setting is present.
    pub fn is_empty(&self) -> bool {
        self.nameservers.is_empty()
            && self.domain.is_none()
            && self.search.is_empty()
            && self.options.is_empty()
    }
}

/// An address of a 0.3.x / 0.4.0 result: the 1.x one plus `version`.
#[derive(Debug, Serialize, Deserialize)]
struct IpConfig04 {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    address: IpNet,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interface: Option<usize>,
}

/// A 0.3.0 / 0.3.1 / 0.4.0 result.
#[derive(Debug, Serialize, Deserialize)]
struct Result04 {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    interfaces: Vec<Interface>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ips: Vec<IpConfig04>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    routes: Vec<Route>,
    #[serde(default)]
    dns: Dns,
}

/// The `ip4` / `ip6` object of a 0.1.0 / 0.2.0 result.
#[derive(Debug, Serialize, Deserialize)]
struct IpConfig02 {
    ip: IpNet,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    routes: Vec<Route>,
}

/// A 0.1.0 / 0.2.0 result.
#[derive(Debug, Serialize, Deserialize)]
struct Result02 {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ip4: Option<IpConfig02>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ip6: Option<IpConfig02>,
    #[serde(default)]
    dns: Dns,
}

/// The address family of an IP version field: `"4"` or `"6"`.
fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() { "4" } else { "6" }
}

impl From<&crate::api::RouteSpec> for Route {
    /// The result's view of a route the daemon handed out.
    fn from(r: &crate::api::RouteSpec) -> Route {
        Route {
            dst: r.dst,
            gw: r.gw,
            mtu: r.mtu,
            advmss: None,
            priority: None,
            table: None,
            scope: None,
        }
    }
}

/// A route with only the fields versions before 1.0.0 define (`dst`, `gw`).
fn route_0x(r: &Route) -> Route {
    Route {
        dst: r.dst,
        gw: r.gw,
        mtu: None,
        advmss: None,
        priority: None,
        table: None,
        scope: None,
    }
}

fn prev_error(msg: String) -> CniError {
    CniError::new(ErrorCode::Decode, msg)
}

/// Keys whose empty string means "absent", as Go's decoder reads them.
const EMPTY_MEANS_ABSENT: [&str; 7] = [
    "gateway",
    "gw",
    "mac",
    "sandbox",
    "socketPath",
    "pciID",
    "domain",
];

/// Drops object members that are `null` (and empty optional strings), so that
/// they read as absent, like Go's `encoding/json` does.
fn strip_absent(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, v)| match v {
                    Value::Null => false,
                    Value::String(s) => !(s.is_empty() && EMPTY_MEANS_ABSENT.contains(&k.as_str())),
                    _ => true,
                })
                .map(|(k, v)| (k, strip_absent(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_absent).collect()),
        other => other,
    }
}

fn to_object<T: Serialize>(value: &T) -> Result<Map<String, Value>, CniError> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(CniError::new(
            ErrorCode::Internal,
            "result did not serialize to an object",
        )),
        Err(e) => Err(
            CniError::new(ErrorCode::Internal, "failed to encode result")
                .with_details(e.to_string()),
        ),
    }
}

impl CniResult {
    /// The result as printed for the config's `cniVersion` `v`, with the
    /// spec's conversions:
    ///
    /// - 1.0.0 / 1.1.0: as is; `dns` left out when empty.
    /// - 0.3.0 / 0.3.1 / 0.4.0: `ips[].version` (`"4"`/`"6"`) added;
    ///   interfaces keep `name`, `mac`, `sandbox`; routes keep `dst`, `gw`.
    /// - 0.1.0 / 0.2.0: the first IPv4 and first IPv6 address become `ip4` and
    ///   `ip6` (`ip`, `gateway`), routes go to the block of their destination's
    ///   family (`dst`, `gw`), plus `dns`; no interfaces. A result without any
    ///   address cannot be expressed: error 1.
    ///
    /// The output always carries `"cniVersion"`.
    pub fn to_json(&self, v: Version) -> Result<Value, CniError> {
        let mut obj = match v {
            Version::V1_0_0 | Version::V1_1_0 => to_object(self)?,
            Version::V0_3_0 | Version::V0_3_1 | Version::V0_4_0 => to_object(&self.to_04x())?,
            Version::V0_1_0 | Version::V0_2_0 => to_object(&self.to_02x(v)?)?,
        };
        obj.insert("cniVersion".into(), Value::String(v.as_str().into()));
        Ok(Value::Object(obj))
    }

    fn to_04x(&self) -> Result04 {
        Result04 {
            interfaces: self
                .interfaces
                .iter()
                .map(|i| Interface {
                    name: i.name.clone(),
                    mac: i.mac.clone(),
                    sandbox: i.sandbox.clone(),
                    ..Interface::default()
                })
                .collect(),
            ips: self
                .ips
                .iter()
                .map(|ip| IpConfig04 {
                    version: Some(family(ip.address.addr()).into()),
                    address: ip.address,
                    gateway: ip.gateway,
                    interface: ip.interface,
                })
                .collect(),
            routes: self.routes.iter().map(route_0x).collect(),
            dns: self.dns.clone(),
        }
    }

    fn to_02x(&self, v: Version) -> Result<Result02, CniError> {
        let block = |v4: bool| {
            self.ips
                .iter()
                .find(|ip| ip.address.addr().is_ipv4() == v4)
                .map(|ip| IpConfig02 {
                    ip: ip.address,
                    gateway: ip.gateway,
                    routes: self
                        .routes
                        .iter()
                        .filter(|r| r.dst.addr().is_ipv4() == v4)
                        .map(route_0x)
                        .collect(),
                })
        };
        let out = Result02 {
            ip4: block(true),
            ip6: block(false),
            dns: self.dns.clone(),
        };
        if out.ip4.is_none() && out.ip6.is_none() {
            return Err(CniError::new(
                ErrorCode::IncompatibleVersion,
                format!("cannot express the result in cniVersion {v}: it has no IP address"),
            ));
        }
        Ok(out)
    }

    /// Parses a `prevResult` into the 1.x type. Its shape is that of its own
    /// `cniVersion` when it carries one, else that of `v` (the config's
    /// version); older shapes are converted up (0.3.x/0.4.0 drop
    /// `ips[].version` after checking it matches the address; 0.1.0/0.2.0
    /// `ip4`/`ip6` become `ips` and their routes are merged, with no
    /// interfaces). `null` members count as absent.
    ///
    /// Every error is code 6 naming `prevResult`.
    pub fn from_json(value: &Value, v: Version) -> Result<CniResult, CniError> {
        let Value::Object(obj) = value else {
            return Err(prev_error("`prevResult` is not a JSON object".into()));
        };
        let format = match obj.get("cniVersion") {
            None | Some(Value::Null) => v,
            Some(Value::String(s)) if s.is_empty() => v,
            Some(Value::String(s)) => Version::parse(s).map_err(|_| {
                prev_error(format!(
                    "`prevResult.cniVersion` {:?} is not supported",
                    truncate(s)
                ))
            })?,
            Some(_) => return Err(prev_error("`prevResult.cniVersion` is not a string".into())),
        };
        let value = strip_absent(value.clone());
        let decode = |e: serde_json::Error| {
            prev_error(format!(
                "failed to decode `prevResult` as a {format} result"
            ))
            .with_details(e.to_string())
        };
        match format {
            Version::V1_0_0 | Version::V1_1_0 => serde_json::from_value(value).map_err(decode),
            Version::V0_3_0 | Version::V0_3_1 | Version::V0_4_0 => {
                from_04x(serde_json::from_value(value).map_err(decode)?)
            }
            Version::V0_1_0 | Version::V0_2_0 => {
                from_02x(serde_json::from_value(value).map_err(decode)?)
            }
        }
    }
}

fn from_04x(r: Result04) -> Result<CniResult, CniError> {
    let mut ips = Vec::with_capacity(r.ips.len());
    for (i, ip) in r.ips.into_iter().enumerate() {
        let addr = ip.address.addr();
        // Go's libcni calls an IPv4-mapped IPv6 address version "4".
        let mapped_v4 = matches!(addr, IpAddr::V6(a) if a.to_ipv4_mapped().is_some());
        if let Some(version) = &ip.version
            && version != family(addr)
            && !(mapped_v4 && version == "4")
        {
            return Err(prev_error(format!(
                "`prevResult.ips[{i}].version` {:?} does not match address {}",
                truncate(version),
                ip.address
            )));
        }
        ips.push(IpConfig {
            address: ip.address,
            gateway: ip.gateway,
            interface: ip.interface,
        });
    }
    Ok(CniResult {
        interfaces: r.interfaces,
        ips,
        routes: r.routes,
        dns: r.dns,
    })
}

fn from_02x(r: Result02) -> Result<CniResult, CniError> {
    let mut out = CniResult {
        dns: r.dns,
        ..CniResult::default()
    };
    for (key, block, v4) in [("ip4", r.ip4, true), ("ip6", r.ip6, false)] {
        let Some(block) = block else { continue };
        if block.ip.addr().is_ipv4() != v4 {
            return Err(prev_error(format!(
                "`prevResult.{key}.ip` {} is not an IPv{} address",
                block.ip,
                if v4 { 4 } else { 6 }
            )));
        }
        out.ips.push(IpConfig {
            address: block.ip,
            gateway: block.gateway,
            interface: None,
        });
        out.routes.extend(block.routes);
    }
    Ok(out)
}

#[cfg(test)]
#[path = "result_tests.rs"]
mod tests;
