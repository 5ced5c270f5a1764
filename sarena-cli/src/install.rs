//! `sarena install-cni`: the plugin and its conflist onto this node, or
//! `--uninstall` (the logic is [`sarena_core::install::Installer`]'s).

use std::path::{Path, PathBuf};

use sarena_core::delqueue::DeleteQueue;
use sarena_core::install::{ConflistOptions, Installer, generate_conflist};
use serde::Serialize;

use crate::cli::InstallCniArgs;
use crate::{CliError, OutputFormat, json};

/// What `install-cni` did (`-o json`).
#[derive(Debug, Default, Serialize)]
pub struct InstallReport {
    /// The plugin: its path and `written` or `unchanged`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<(PathBuf, String)>,
    /// The conflist: its path and `written` or `unchanged`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflist: Option<(PathBuf, String)>,
    /// Other networks' configs renamed by --exclusive.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<PathBuf>,
    /// --uninstall: Sarena's conflist removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<PathBuf>,
    /// --uninstall: other networks' configs put back.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<PathBuf>,
}

/// Runs `install-cni` (the generated conflist talks to `socket`).
pub fn run(args: &InstallCniArgs, socket: &Path, output: OutputFormat) -> Result<String, CliError> {
    let report = act(args, socket)?;
    match output {
        OutputFormat::Json => json(&report),
        OutputFormat::Table => Ok(render(args, &report)),
    }
}

fn act(args: &InstallCniArgs, socket: &Path) -> Result<InstallReport, CliError> {
    let install = |source| CliError::Install { source };
    let installer = Installer::new(&args.cni_bin_dir, &args.cni_conf_dir)
        .with_conflist_name(&args.conflist_name)
        .map_err(install)?;
    let mut report = InstallReport::default();
    if args.uninstall {
        let done = installer.uninstall().map_err(install)?;
        report.removed = done.removed;
        report.restored = done.restored;
        return Ok(report);
    }
    // The plugin before the conflist: a config never names a missing binary.
    let plugin = match &args.plugin {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .map_err(|source| CliError::NoPlugin { source })?
            .with_file_name(sarena_core::install::PLUGIN_NAME),
    };
    let outcome = installer.install_plugin(&plugin).map_err(install)?;
    report.plugin = Some((
        installer.bin_dir().join(sarena_core::install::PLUGIN_NAME),
        outcome.to_string(),
    ));
    if args.exclusive {
        report.set_aside = installer.set_aside_others().map_err(install)?;
    }
    if !args.plugin_only {
        let body = match &args.conflist {
            Some(path) => std::fs::read(path).map_err(|source| CliError::Install {
                source: sarena_core::install::InstallError::Io {
                    call: "read",
                    path: path.clone(),
                    source,
                },
            })?,
            None => generate_conflist(&ConflistOptions::for_daemon(
                socket,
                Path::new(DeleteQueue::DEFAULT_DIR),
            )),
        };
        let outcome = installer.write_conflist(&body).map_err(install)?;
        report.conflist = Some((installer.conflist_path(), outcome.to_string()));
    }
    Ok(report)
}

fn render(args: &InstallCniArgs, r: &InstallReport) -> String {
    let mut out = String::new();
    let mut line = |what: &str, path: &Path, tail: &str| {
        out.push_str(&format!("{what:<9} {}{tail}\n", path.display()));
    };
    if let Some((path, outcome)) = &r.plugin {
        line("plugin", path, &format!(": {outcome}"));
    }
    for path in &r.set_aside {
        line("set aside", path, "");
    }
    if let Some((path, outcome)) = &r.conflist {
        line("conflist", path, &format!(": {outcome}"));
    }
    if args.uninstall {
        match &r.removed {
            Some(path) => line("removed", path, ""),
            None => line(
                "no conflist",
                &args.cni_conf_dir.join(&args.conflist_name),
                "",
            ),
        }
        for path in &r.restored {
            line("restored", path, "");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(root: &Path, extra: &[&str]) -> InstallCniArgs {
        let bin = format!("--cni-bin-dir={}", root.join("bin").display());
        let conf = format!("--cni-conf-dir={}", root.join("net.d").display());
        let mut all = vec!["sarena", "install-cni", &bin, &conf];
        all.extend(extra);
        match crate::Cli::try_parse_from(all).unwrap().command {
            crate::Command::InstallCni(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn install_then_uninstall_through_the_command() {
        let root = tempfile::tempdir().unwrap();
        let plugin = root.path().join("sarena-cni.build");
        std::fs::write(&plugin, b"plugin").unwrap();
        let plugin_arg = format!("--plugin={}", plugin.display());
        let socket = Path::new("/run/other/sarena.sock");

        let only = args(root.path(), &[&plugin_arg, "--plugin-only"]);
        let out = run(&only, socket, OutputFormat::Table).unwrap();
        let bin = root.path().join("bin/sarena-cni");
        assert_eq!(out, format!("plugin    {}: written\n", bin.display()));
        assert!(!root.path().join("net.d/10-sarena.conflist").exists());

        let full = args(root.path(), &[&plugin_arg]);
        let out: serde_json::Value =
            serde_json::from_str(&run(&full, socket, OutputFormat::Json).unwrap()).unwrap();
        let conf = root.path().join("net.d/10-sarena.conflist");
        assert_eq!(out["plugin"][1], "unchanged");
        assert_eq!(out["conflist"][0], conf.display().to_string());
        assert_eq!(out["conflist"][1], "written");
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&conf).unwrap()).unwrap();
        assert_eq!(
            written["plugins"][0]["daemon-endpoint"],
            "/run/other/sarena.sock"
        );

        let gone = args(root.path(), &["--uninstall"]);
        let out = run(&gone, socket, OutputFormat::Table).unwrap();
        assert_eq!(out, format!("removed   {}\n", conf.display()));
        assert!(
            !conf.exists() && bin.exists(),
            "the conflist goes, the plugin stays"
        );
        let out = run(&gone, socket, OutputFormat::Table).unwrap();
        assert_eq!(out, format!("no conflist {}\n", conf.display()));
    }

    #[test]
    fn a_given_conflist_is_checked_before_it_is_written() {
        let root = tempfile::tempdir().unwrap();
        let plugin = root.path().join("p");
        std::fs::write(&plugin, b"plugin").unwrap();
        let bad = root.path().join("bad.conflist");
        std::fs::write(
            &bad,
            br#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"}]}"#,
        )
        .unwrap();
        let a = args(
            root.path(),
            &[
                &format!("--plugin={}", plugin.display()),
                &format!("--conflist={}", bad.display()),
            ],
        );
        let err = run(&a, Path::new("/s"), OutputFormat::Table).unwrap_err();
        assert!(
            sarena_core::error_chain(&err).contains("no plugin of type `sarena-cni`"),
            "{err}"
        );
        assert!(!root.path().join("net.d/10-sarena.conflist").exists());
    }
}
