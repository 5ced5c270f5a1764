//! The `CNI_*` environment variables.

use std::path::PathBuf;

use super::args::CniArgs;
use super::error::{CniError, ErrorCode};
use super::validate;
use super::version::{Version, truncate};

/// `CNI_COMMAND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// ADD.
    Add,
    /// DEL.
    Del,
    /// CHECK.
    Check,
    /// STATUS.
    Status,
    /// GC.
    Gc,
    /// VERSION.
    Version,
}

impl Command {
    /// Every command.
    pub const ALL: [Command; 6] = [
        Command::Add,
        Command::Del,
        Command::Check,
        Command::Status,
        Command::Gc,
        Command::Version,
    ];

    /// Parses `CNI_COMMAND` (exact, upper case). Error 4 naming `CNI_COMMAND`.
    pub fn parse(s: &str) -> Result<Command, CniError> {
        Command::ALL.into_iter().find(|c| c.as_str() == s).ok_or_else(|| {
            CniError::new(
                ErrorCode::InvalidEnvironment,
                format!(
                    "invalid CNI_COMMAND {:?}: expected one of ADD, DEL, CHECK, STATUS, GC, VERSION",
                    truncate(s)
                ),
            )
        })
    }

    /// The command as the runtime spells it, e.g. `"ADD"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Status => "STATUS",
            Command::Gc => "GC",
            Command::Version => "VERSION",
        }
    }

    /// The oldest config `cniVersion` the command exists in: CHECK 0.4.0,
    /// STATUS and GC 1.1.0, the others 0.1.0.
    pub fn min_version(self) -> Version {
        match self {
            Command::Check => Version::V0_4_0,
            Command::Status | Command::Gc => Version::V1_1_0,
            Command::Add | Command::Del | Command::Version => Version::V0_1_0,
        }
    }

    /// True for the commands that act on one attachment (ADD, DEL, CHECK) and
    /// so read `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME` and `CNI_ARGS`.
    pub fn is_attachment(self) -> bool {
        matches!(self, Command::Add | Command::Del | Command::Check)
    }
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The environment of one plugin invocation, validated for its command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniEnv {
    /// `CNI_COMMAND`.
    pub command: Command,
    /// `CNI_CONTAINERID` (required by ADD, CHECK, DEL).
    pub container_id: Option<String>,
    /// `CNI_NETNS` (required by ADD and CHECK; DEL may have none).
    pub netns: Option<PathBuf>,
    /// `CNI_IFNAME` (required by ADD, CHECK, DEL).
    pub ifname: Option<String>,
    /// `CNI_ARGS`.
    pub args: CniArgs,
    /// `CNI_PATH`, split on `:`.
    pub path: Vec<PathBuf>,
}

/// The variables [`CniEnv`] reads.
pub const VARIABLES: [&str; 6] = [
    "CNI_COMMAND",
    "CNI_CONTAINERID",
    "CNI_NETNS",
    "CNI_IFNAME",
    "CNI_ARGS",
    "CNI_PATH",
];

fn missing(var: &str, command: Command) -> CniError {
    CniError::new(
        ErrorCode::InvalidEnvironment,
        format!("missing environment variable {var} (required by {command})"),
    )
}

impl CniEnv {
    /// Reads and validates the environment through `lookup` (a variable name
    /// to its value). An empty value counts as missing.
    ///
    /// - `CNI_COMMAND` is always required.
    /// - ADD and CHECK require `CNI_CONTAINERID`, `CNI_NETNS` and `CNI_IFNAME`;
    ///   DEL requires `CNI_CONTAINERID` and `CNI_IFNAME` (no `CNI_NETNS` gives `None`).
    ///   The container id and interface name are validated ([`validate`]), and
    ///   `CNI_ARGS` is parsed ([`CniArgs::parse`]).
    /// - STATUS, GC and VERSION are not about one attachment: they need none of
    ///   these, and `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME` and `CNI_ARGS`
    ///   are not read for them (left `None` / default).
    /// - `CNI_PATH` is split on `:`, empty parts dropped, for every command.
    ///
    /// Every error has code 4 and names the variable.
    ///
    /// ```
    /// use sarena_plugin::cni::{CniEnv, Command};
    /// let env = CniEnv::from_lookup(|k| match k {
    ///     "CNI_COMMAND" => Some("DEL".into()),
    ///     "CNI_CONTAINERID" => Some("abc123".into()),
    ///     "CNI_IFNAME" => Some("eth0".into()),
    ///     _ => None,
    /// })
    /// .unwrap();
    /// assert_eq!(env.command, Command::Del);
    /// assert_eq!(env.netns, None);
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<CniEnv, CniError> {
        let get = |var: &str| lookup(var).filter(|v| !v.is_empty());
        let command = Command::parse(&get("CNI_COMMAND").ok_or_else(|| {
            CniError::new(
                ErrorCode::InvalidEnvironment,
                "missing environment variable CNI_COMMAND",
            )
        })?)?;
        let path = get("CNI_PATH")
            .map(|p| {
                p.split(':')
                    .filter(|s| !s.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default();
        let mut env = CniEnv {
            command,
            container_id: None,
            netns: None,
            ifname: None,
            args: CniArgs::default(),
            path,
        };
        if !command.is_attachment() {
            return Ok(env);
        }
        let container_id =
            get("CNI_CONTAINERID").ok_or_else(|| missing("CNI_CONTAINERID", command))?;
        validate::container_id(&container_id)?;
        let netns = get("CNI_NETNS").map(PathBuf::from);
        if netns.is_none() && command != Command::Del {
            return Err(missing("CNI_NETNS", command));
        }
        let ifname = get("CNI_IFNAME").ok_or_else(|| missing("CNI_IFNAME", command))?;
        validate::interface_name(&ifname)?;
        env.args = CniArgs::parse(&get("CNI_ARGS").unwrap_or_default())?;
        env.container_id = Some(container_id);
        env.netns = netns;
        env.ifname = Some(ifname);
        Ok(env)
    }

    /// Reads the process environment ([`CniEnv::from_lookup`] over
    /// `std::env`). A `CNI_*` variable that is not valid UTF-8 is error 4
    /// naming it.
    pub fn from_process_env() -> Result<CniEnv, CniError> {
        for var in VARIABLES {
            if let Some(value) = std::env::var_os(var)
                && value.to_str().is_none()
            {
                return Err(CniError::new(
                    ErrorCode::InvalidEnvironment,
                    format!("environment variable {var} is not valid UTF-8"),
                ));
            }
        }
        CniEnv::from_lookup(|var| std::env::var(var).ok())
    }

    /// `CNI_CONTAINERID`, or error 4 naming it (for code paths that need it).
    pub fn require_container_id(&self) -> Result<&str, CniError> {
        self.container_id
            .as_deref()
            .ok_or_else(|| missing("CNI_CONTAINERID", self.command))
    }

    /// `CNI_IFNAME`, or error 4 naming it (for code paths that need it).
    pub fn require_ifname(&self) -> Result<&str, CniError> {
        self.ifname
            .as_deref()
            .ok_or_else(|| missing("CNI_IFNAME", self.command))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> Result<CniEnv, CniError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        CniEnv::from_lookup(|k| map.get(k).cloned())
    }

    fn full(command: &str) -> Vec<(&str, &str)> {
        vec![
            ("CNI_COMMAND", command),
            ("CNI_CONTAINERID", "abc123"),
            ("CNI_NETNS", "/var/run/netns/cni-1"),
            ("CNI_IFNAME", "eth0"),
            (
                "CNI_ARGS",
                "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web",
            ),
            ("CNI_PATH", "/opt/cni/bin::/usr/libexec/cni:"),
        ]
    }

    fn assert_env_err(pairs: &[(&str, &str)], var: &str) {
        let e = env_of(pairs).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidEnvironment, "{pairs:?}");
        assert!(e.msg.contains(var), "expected {var} in {}", e.msg);
    }

    fn without<'a>(pairs: &[(&'a str, &'a str)], var: &str) -> Vec<(&'a str, &'a str)> {
        pairs.iter().filter(|(k, _)| *k != var).copied().collect()
    }

    fn with<'a>(pairs: &[(&'a str, &'a str)], var: &'a str, v: &'a str) -> Vec<(&'a str, &'a str)> {
        let mut out = without(pairs, var);
        out.push((var, v));
        out
    }

    #[test]
    fn command_parse_and_as_str_round_trip() {
        for c in Command::ALL {
            assert_eq!(Command::parse(c.as_str()).unwrap(), c);
            assert_eq!(c.to_string(), c.as_str());
        }
        for bad in ["add", "Add", "", "DELETE", " ADD"] {
            let e = Command::parse(bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidEnvironment);
            assert!(e.msg.contains("CNI_COMMAND"));
        }
    }

    #[test]
    fn command_min_versions() {
        assert_eq!(Command::Add.min_version(), Version::V0_1_0);
        assert_eq!(Command::Del.min_version(), Version::V0_1_0);
        assert_eq!(Command::Version.min_version(), Version::V0_1_0);
        assert_eq!(Command::Check.min_version(), Version::V0_4_0);
        assert_eq!(Command::Status.min_version(), Version::V1_1_0);
        assert_eq!(Command::Gc.min_version(), Version::V1_1_0);
    }

    #[test]
    fn add_and_check_read_everything() {
        for cmd in ["ADD", "CHECK"] {
            let env = env_of(&full(cmd)).unwrap();
            assert_eq!(env.command.as_str(), cmd);
            assert_eq!(env.container_id.as_deref(), Some("abc123"));
            assert_eq!(env.netns, Some(PathBuf::from("/var/run/netns/cni-1")));
            assert_eq!(env.ifname.as_deref(), Some("eth0"));
            assert_eq!(env.args.pod_name.as_deref(), Some("web"));
            assert_eq!(
                env.path,
                vec![PathBuf::from("/opt/cni/bin"), "/usr/libexec/cni".into()]
            );
            assert_eq!(env.require_container_id().unwrap(), "abc123");
            assert_eq!(env.require_ifname().unwrap(), "eth0");
        }
    }

    #[test]
    fn add_and_check_require_containerid_netns_ifname() {
        for cmd in ["ADD", "CHECK"] {
            for var in ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"] {
                assert_env_err(&without(&full(cmd), var), var);
                assert_env_err(&with(&full(cmd), var, ""), var);
            }
        }
    }

    #[test]
    fn del_needs_containerid_and_ifname_but_not_netns() {
        let env = env_of(&without(&full("DEL"), "CNI_NETNS")).unwrap();
        assert_eq!(env.netns, None);
        let env = env_of(&with(&full("DEL"), "CNI_NETNS", "")).unwrap();
        assert_eq!(env.netns, None);
        let env = env_of(&full("DEL")).unwrap();
        assert_eq!(env.netns, Some(PathBuf::from("/var/run/netns/cni-1")));
        for var in ["CNI_CONTAINERID", "CNI_IFNAME"] {
            assert_env_err(&without(&full("DEL"), var), var);
            assert_env_err(&with(&full("DEL"), var, ""), var);
        }
    }

    #[test]
    fn status_gc_version_need_nothing_else() {
        for cmd in ["STATUS", "GC", "VERSION"] {
            let env = env_of(&[("CNI_COMMAND", cmd)]).unwrap();
            assert_eq!(env.command.as_str(), cmd);
            assert_eq!(env.container_id, None);
            assert_eq!(env.netns, None);
            assert_eq!(env.ifname, None);
            assert!(env.path.is_empty());
            assert_env_err(&[], "CNI_COMMAND");
            // Attachment variables, even malformed ones, are not read.
            let env = env_of(&[
                ("CNI_COMMAND", cmd),
                ("CNI_CONTAINERID", "-bad"),
                ("CNI_IFNAME", "a/b"),
                ("CNI_ARGS", "junk"),
                ("CNI_PATH", "/opt/cni/bin"),
            ])
            .unwrap();
            assert_eq!(env.container_id, None);
            assert_eq!(env.args, CniArgs::default());
            assert_eq!(env.path, vec![PathBuf::from("/opt/cni/bin")]);
            let e = env.require_container_id().unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidEnvironment);
            assert!(e.msg.contains("CNI_CONTAINERID"));
            assert!(env.require_ifname().unwrap_err().msg.contains("CNI_IFNAME"));
        }
    }

    #[test]
    fn missing_or_invalid_command() {
        assert_env_err(&without(&full("ADD"), "CNI_COMMAND"), "CNI_COMMAND");
        assert_env_err(&with(&full("ADD"), "CNI_COMMAND", ""), "CNI_COMMAND");
        assert_env_err(&with(&full("ADD"), "CNI_COMMAND", "FROB"), "CNI_COMMAND");
    }

    #[test]
    fn invalid_container_id_and_ifname_are_rejected() {
        for cmd in ["ADD", "DEL", "CHECK"] {
            assert_env_err(
                &with(&full(cmd), "CNI_CONTAINERID", "_abc"),
                "CNI_CONTAINERID",
            );
            assert_env_err(
                &with(&full(cmd), "CNI_CONTAINERID", "a b"),
                "CNI_CONTAINERID",
            );
            assert_env_err(&with(&full(cmd), "CNI_IFNAME", "eth0:1"), "CNI_IFNAME");
            assert_env_err(
                &with(&full(cmd), "CNI_IFNAME", "averyveryverylongname"),
                "CNI_IFNAME",
            );
            assert_env_err(&with(&full(cmd), "CNI_IFNAME", ".."), "CNI_IFNAME");
        }
    }

    #[test]
    fn bad_cni_args_are_rejected() {
        assert_env_err(&with(&full("ADD"), "CNI_ARGS", "FOO=bar"), "CNI_ARGS");
        assert_env_err(&with(&full("ADD"), "CNI_ARGS", "A"), "CNI_ARGS");
        let env = env_of(&without(&full("ADD"), "CNI_ARGS")).unwrap();
        assert_eq!(env.args, CniArgs::default());
    }

    #[test]
    fn process_env_without_command_names_it() {
        if std::env::var_os("CNI_COMMAND").is_none() {
            let e = CniEnv::from_process_env().unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidEnvironment);
            assert!(e.msg.contains("CNI_COMMAND"));
        }
    }

    #[test]
    fn cni_path_split_drops_empty_parts() {
        let env = env_of(&with(&full("ADD"), "CNI_PATH", ":::")).unwrap();
        assert!(env.path.is_empty());
        let env = env_of(&with(&full("ADD"), "CNI_PATH", "/a:/b")).unwrap();
        assert_eq!(env.path, vec![PathBuf::from("/a"), PathBuf::from("/b")]);
    }
}
