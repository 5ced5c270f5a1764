//! `sarena policy list` and `sarena policy explain`: NetworkPolicy as the
//! daemon enforces it (Kubernetes mode).
//!
//! `explain` exits 0 when the packet is allowed and 1 when it is denied,
//! the explanation on stdout either way (like `kubectl auth can-i`); an
//! error is 1 too, with its one line on stderr and nothing on stdout.

use sarena_core::api::{
    NodeApi, PolicyDecision, PolicyEndpoint, PolicyExplanation, PolicyParty, PolicyProtocol,
    PolicyQuery, PolicyVerdict,
};

use crate::table::table;
use crate::{CliError, OutputFormat, json};

/// `--port PORT[/PROTOCOL]` (protocol TCP by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortArg {
    /// The port (1–65535).
    pub port: u16,
    /// TCP, UDP or SCTP.
    pub protocol: PolicyProtocol,
}

impl std::str::FromStr for PortArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (port, protocol) = s.split_once('/').unwrap_or((s, "TCP"));
        Ok(PortArg {
            port: port
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("{port:?} is no port (1-65535)"))?,
            protocol: protocol.parse()?,
        })
    }
}

/// Every endpoint of the node with its isolation and policies.
pub async fn list(daemon: &dyn NodeApi, output: OutputFormat) -> Result<String, CliError> {
    let endpoints = daemon.policy_endpoints().await?;
    match output {
        OutputFormat::Json => json(&endpoints),
        OutputFormat::Table => Ok(render_list(&endpoints)),
    }
}

/// `ENDPOINT INGRESS EGRESS POLICIES`.
pub fn render_list(endpoints: &[PolicyEndpoint]) -> String {
    let mark = |isolated: bool| if isolated { "isolated" } else { "open" }.to_owned();
    let rows = endpoints.iter().map(|e| {
        let policies = if e.policies.is_empty() {
            "-".to_owned()
        } else {
            e.policies.join(",")
        };
        vec![
            format!("{}/{}", e.namespace, e.name),
            mark(e.ingress_isolated),
            mark(e.egress_isolated),
            policies,
        ]
    });
    table(&["ENDPOINT", "INGRESS", "EGRESS", "POLICIES"], rows)
}

/// Explains a packet; [`CliError::Denied`] (exit 1) when policy drops it.
pub async fn explain(
    daemon: &dyn NodeApi,
    output: OutputFormat,
    from: PolicyParty,
    to: PolicyParty,
    port: PortArg,
) -> Result<String, CliError> {
    let query = PolicyQuery {
        from,
        to,
        port: port.port,
        protocol: port.protocol,
    };
    let explanation = daemon.policy_explain(query).await?;
    let text = match output {
        OutputFormat::Json => json(&explanation)?,
        OutputFormat::Table => render_explanation(&explanation),
    };
    if explanation.allowed {
        Ok(text)
    } else {
        Err(CliError::Denied { report: text })
    }
}

/// One line per direction, then the verdict.
pub fn render_explanation(e: &PolicyExplanation) -> String {
    let q = &e.query;
    let mut out = format!(
        "{} -> {} {}/{}\n",
        q.from,
        q.to,
        q.port,
        q.protocol.as_str()
    );
    let line = |direction: &str, d: &Option<PolicyDecision>, outside: &PolicyParty| match d {
        None => format!("  {direction:<8} not enforced here ({outside} is no pod of this node)\n"),
        Some(d) => {
            let why = match (d.verdict, &d.rule) {
                (PolicyVerdict::NotIsolated, _) => "no policy selects it".to_owned(),
                (PolicyVerdict::Host, _) => "traffic with its own node".to_owned(),
                (PolicyVerdict::Allowed, Some(rule)) => format!("allowed by {rule}"),
                (PolicyVerdict::Allowed, None) => "allowed".to_owned(),
                (PolicyVerdict::Denied, _) => {
                    format!("no rule of {} allows it", d.policies.join(", "))
                }
            };
            let verdict = if d.allowed() { "allow" } else { "deny" };
            format!("  {direction:<8} {verdict:<5} {}: {why}\n", d.pod)
        }
    };
    out.push_str(&line("egress", &e.egress, &q.from));
    out.push_str(&line("ingress", &e.ingress, &q.to));
    out.push_str(if e.allowed { "allowed\n" } else { "denied\n" });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(pod: &str, verdict: PolicyVerdict, rule: Option<&str>) -> PolicyDecision {
        PolicyDecision {
            pod: pod.into(),
            verdict,
            rule: rule.map(str::to_owned),
            policies: vec!["ns/web-policy".into()],
        }
    }

    #[test]
    fn ports_take_an_optional_protocol() {
        let p: PortArg = "80".parse().unwrap();
        assert_eq!((p.port, p.protocol), (80, PolicyProtocol::Tcp));
        let p: PortArg = "53/udp".parse().unwrap();
        assert_eq!((p.port, p.protocol), (53, PolicyProtocol::Udp));
        for bad in ["0", "http", "80/icmp", "70000/TCP", ""] {
            assert!(bad.parse::<PortArg>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_list_shows_isolation_and_policies() {
        let out = render_list(&[
            PolicyEndpoint {
                namespace: "ns".into(),
                name: "web".into(),
                ingress_isolated: true,
                egress_isolated: false,
                policies: vec!["ns/a".into(), "ns/b".into()],
            },
            PolicyEndpoint {
                namespace: "ns".into(),
                name: "free".into(),
                ingress_isolated: false,
                egress_isolated: false,
                policies: vec![],
            },
        ]);
        let web: Vec<&str> = out
            .lines()
            .find(|l| l.starts_with("ns/web"))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(web, ["ns/web", "isolated", "open", "ns/a,ns/b"]);
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().eq(["ns/free", "open", "open", "-"]))
        );
    }

    #[test]
    fn an_explanation_names_the_rule_or_the_policies_that_deny() {
        let query = PolicyQuery {
            from: "ns/client".parse().unwrap(),
            to: "ns/web".parse().unwrap(),
            port: 80,
            protocol: PolicyProtocol::Tcp,
        };
        let allowed = PolicyExplanation {
            query: query.clone(),
            egress: Some(decision("ns/client", PolicyVerdict::NotIsolated, None)),
            ingress: Some(decision(
                "ns/web",
                PolicyVerdict::Allowed,
                Some("ns/web-policy ingress[0]"),
            )),
            allowed: true,
        };
        let out = render_explanation(&allowed);
        assert!(out.starts_with("ns/client -> ns/web 80/TCP\n"), "{out}");
        assert!(
            out.contains("egress   allow ns/client: no policy selects it"),
            "{out}"
        );
        assert!(
            out.contains("ingress  allow ns/web: allowed by ns/web-policy ingress[0]"),
            "{out}"
        );
        assert!(out.ends_with("allowed\n"));
        let denied = PolicyExplanation {
            query,
            egress: None,
            ingress: Some(decision("ns/web", PolicyVerdict::Denied, None)),
            allowed: false,
        };
        let out = render_explanation(&denied);
        assert!(
            out.contains("egress   not enforced here (ns/client is no pod of this node)"),
            "{out}"
        );
        assert!(
            out.contains("ingress  deny  ns/web: no rule of ns/web-policy allows it"),
            "{out}"
        );
        assert!(out.ends_with("denied\n"));
    }
}
