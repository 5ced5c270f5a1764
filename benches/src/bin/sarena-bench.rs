//! `sarena-bench`: the benchmark harness of issue 6. Runs the CNI operation
//! benchmarks (latency, churn, scale) and the dataplane benchmark on throwaway
//! nodes, the NetworkPolicy engine's scale and change latency in process
//! (issue 26), writes each part's results as JSON, and renders
//! docs/benchmarks.md. Must run as root (but for `policy` and `report`).
//! `scripts/bench.sh` is the one documented command.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use sarena_benches::BenchError;
use sarena_benches::cni_ops::{self, CniOptions, CniResults};
use sarena_benches::dataplane::crossnode::{self, CrossKind, CrossNodeOptions, CrossNodeResults};
use sarena_benches::dataplane::{self, DataplaneOptions, DataplaneResults, PathKind};
use sarena_benches::node::{Bins, Contender};
use sarena_benches::policy::{self, ClusterSpec, PolicyOptions, PolicyResults};
use sarena_benches::report::{self, Machine, ReportInputs};
use serde::{Deserialize, Serialize};

#[derive(Debug, Parser)]
#[command(
    name = "sarena-bench",
    version,
    about = "Sarena's benchmark harness (run as root)"
)]
struct Cli {
    #[command(subcommand)]
    part: Part,
}

#[derive(Debug, Subcommand)]
enum Part {
    /// CNI ADD/CHECK/STATUS/DEL latency, churn and scale against the reference plugins.
    Cni(RunArgs),
    /// Pod ↔ pod throughput and request/response against a raw veth pair.
    Dataplane(RunArgs),
    /// Pods on two nodes against the underlay (issue 27), without and with
    /// a host firewall.
    Crossnode(RunArgs),
    /// The NetworkPolicy engine: scale (10,000 pods, 1,000 policies) and
    /// change latency (1,000 pods, 200 policies), in process; no root needed.
    Policy(RunArgs),
    /// `cni`, then `dataplane`, then `crossnode`, then `policy`, then `report`.
    All(RunArgs),
    /// Renders the page from the JSON results in --out.
    Report(ReportArgs),
    /// `policy`'s scale point in a fresh process: prints its result as JSON.
    #[command(name = policy::CHILD_COMMAND, hide = true)]
    PolicyScaleChild {
        /// The cluster ([`ClusterSpec`] as JSON).
        #[arg(long)]
        spec: String,
    },
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Pods per contender in the latency part.
    #[arg(long, default_value_t = 200)]
    pods: usize,
    /// Tiny numbers: a smoke run of every code path.
    #[arg(long)]
    quick: bool,
    /// Dataplane paths to measure (default: all), comma-separated, named
    /// as in dataplane.json: raw-veth, sarena-ebpf,
    /// sarena-ebpf-beside-limited, sarena-kernel, ptp-host-local,
    /// sarena-ebpf-service, sarena-kernel-service, ptp-host-local-service,
    /// raw-veth6, sarena-ebpf6, sarena-ebpf-embedded,
    /// sarena-ebpf-embedded-policies. Ratios need the raw veth pair of the
    /// path's family among them. `crossnode`'s paths: underlay,
    /// sarena-ebpf-native, sarena-ebpf-vxlan, sarena-ebpf-vxlan-host-stack,
    /// sarena-kernel, host-gw.
    #[arg(long, value_delimiter = ',')]
    paths: Vec<String>,
    /// `cni`'s concurrency levels of the churn part, comma-separated
    /// (default: 20,100; --quick: 5).
    #[arg(long, value_delimiter = ',')]
    churn: Vec<usize>,
    /// `cni`'s rounds of the churn part per level (default: 5; --quick: 2).
    #[arg(long)]
    churn_rounds: Option<usize>,
    /// `cni`'s existing-endpoint levels of the scale part, comma-separated
    /// (default: 0,100,1000; --quick: 0,10).
    #[arg(long, value_delimiter = ',')]
    scale_levels: Vec<usize>,
    /// `cni`'s contenders of the scale part, comma-separated slugs:
    /// sarena-ebpf, sarena-kernel, ptp, bridge (default: the first three).
    #[arg(long, value_delimiter = ',', value_parser = contender_slug)]
    scale_contenders: Vec<Contender>,
    /// `cni`'s runs per operation of the phase table (default: 200;
    /// --quick: 5; 0: none).
    #[arg(long)]
    phase_runs: Option<usize>,
    #[command(flatten)]
    report: ReportArgs,
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// Where the results JSON go.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// Where benchmarks.md and its plots go (default: --out).
    #[arg(long)]
    docs: Option<PathBuf>,
    /// Criterion's output directory (estimates are gathered from it).
    #[arg(long, default_value = "target/criterion")]
    criterion: PathBuf,
    /// The command to print on the page (default: $SARENA_BENCH_COMMAND, else this one).
    #[arg(long)]
    command: Option<String>,
}

/// Facts of the run besides the results.
#[derive(Debug, Serialize, Deserialize)]
struct RunInfo {
    quick: bool,
    command: String,
    machine: Machine,
}

const CNI_JSON: &str = "cni.json";
const DATAPLANE_JSON: &str = "dataplane.json";
const POLICY_JSON: &str = "policy.json";
const CROSSNODE_JSON: &str = "crossnode.json";
const RUN_JSON: &str = "run.json";

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.part) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("sarena-bench: some verifications failed (see the page's last sections)");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("sarena-bench: error: {}", sarena_core::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// Ok(false): finished, but a verification failed.
fn run(part: Part) -> Result<bool, BenchError> {
    match part {
        Part::Cni(a) => {
            start(&a)?;
            cni(&a)
        }
        Part::Dataplane(a) => {
            start(&a)?;
            dp(&a)
        }
        Part::Crossnode(a) => {
            start(&a)?;
            crossnode(&a)
        }
        Part::Policy(a) => {
            write_run_info(&a, None)?;
            policy_part(&a)?;
            Ok(true)
        }
        Part::All(a) => {
            start(&a)?;
            let cni_ok = cni(&a)?;
            let dp_ok = dp(&a)?;
            let cross_ok = crossnode(&a)?;
            policy_part(&a)?;
            report_part(&a.report)?;
            Ok(cni_ok && dp_ok && cross_ok)
        }
        Part::Report(r) => {
            report_part(&r)?;
            Ok(true)
        }
        Part::PolicyScaleChild { spec } => {
            let spec: ClusterSpec =
                serde_json::from_str(&spec).map_err(|source| BenchError::Json {
                    what: "--spec".into(),
                    source,
                })?;
            let result = policy::measure_scale(spec, "a child process of its own")?;
            let json = serde_json::to_string(&result).map_err(|source| BenchError::Json {
                what: "policy scale result".into(),
                source,
            })?;
            println!("{json}");
            Ok(true)
        }
    }
}

fn command_line(r: &ReportArgs) -> String {
    r.command
        .clone()
        .or_else(|| std::env::var("SARENA_BENCH_COMMAND").ok())
        .unwrap_or_else(|| std::env::args().collect::<Vec<_>>().join(" "))
}

/// Root check, output dir, run facts.
fn start(a: &RunArgs) -> Result<(), BenchError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(BenchError::NotRoot);
    }
    if a.pods == 0 {
        return Err(BenchError::Input {
            what: "--pods must be at least 1".into(),
        });
    }
    let bins = Bins::locate()?;
    write_run_info(a, Some(&bins.sarena_cni))
}

/// Output dir, run facts (`policy` alone: no root, no binaries).
fn write_run_info(a: &RunArgs, sarena_cni: Option<&Path>) -> Result<(), BenchError> {
    std::fs::create_dir_all(&a.report.out)
        .map_err(|e| BenchError::io("mkdir", &a.report.out, e))?;
    let info = RunInfo {
        quick: a.quick,
        command: command_line(&a.report),
        machine: report::machine::collect(sarena_cni),
    };
    write_json(&a.report.out.join(RUN_JSON), &info)
}

/// A contender named by its slug ([`Contender::slug`]).
fn contender_slug(slug: &str) -> Result<Contender, String> {
    Contender::ALL
        .into_iter()
        .find(|c| c.slug() == slug)
        .ok_or_else(|| {
            let known: Vec<&str> = Contender::ALL.iter().map(|c| c.slug()).collect();
            format!("unknown contender {slug:?} (known: {})", known.join(", "))
        })
}

fn cni(a: &RunArgs) -> Result<bool, BenchError> {
    let mut opts = if a.quick {
        CniOptions::quick()
    } else {
        CniOptions::full(a.pods)
    };
    if !a.churn.is_empty() {
        opts.churn.clone_from(&a.churn);
    }
    if let Some(rounds) = a.churn_rounds {
        opts.churn_rounds = rounds.max(1);
    }
    if !a.scale_levels.is_empty() {
        opts.scale_levels.clone_from(&a.scale_levels);
    }
    if !a.scale_contenders.is_empty() {
        opts.scale_contenders.clone_from(&a.scale_contenders);
    }
    if let Some(runs) = a.phase_runs {
        opts.phase_runs = runs;
    }
    let bins = Bins::locate()?;
    let results = cni_ops::run(&opts, &bins)?;
    write_json(&a.report.out.join(CNI_JSON), &results)?;
    Ok(results.all_checks_ok())
}

fn dp(a: &RunArgs) -> Result<bool, BenchError> {
    let mut opts = if a.quick {
        DataplaneOptions::quick()
    } else {
        DataplaneOptions::full()
    };
    if !a.paths.is_empty() {
        let known = PathKind::ALL.map(PathKind::name);
        opts.paths = parse_paths(&a.paths, "path", PathKind::from_name, &known)?;
    }
    cni_ops::progress(&format!("dataplane: {} rounds", opts.rounds));
    let results = dataplane::run(&opts)?;
    write_json(&a.report.out.join(DATAPLANE_JSON), &results)?;
    let problems = results.problems();
    for p in &problems {
        cni_ops::progress(&format!("dataplane problem: {p}"));
    }
    Ok(problems.is_empty())
}

fn crossnode(a: &RunArgs) -> Result<bool, BenchError> {
    let mut opts = if a.quick {
        CrossNodeOptions::quick()
    } else {
        CrossNodeOptions::full()
    };
    if !a.paths.is_empty() {
        let known = CrossKind::ALL.map(CrossKind::name);
        let by_name = |n: &str| CrossKind::ALL.into_iter().find(|k| k.name() == n);
        opts.paths = parse_paths(&a.paths, "cross-node path", by_name, &known)?;
    }
    cni_ops::progress(&format!(
        "cross-node: {} rounds, then {} host rules",
        opts.rounds, opts.firewall_rules
    ));
    let results = crossnode::run(&opts, &Bins::locate()?)?;
    write_json(&a.report.out.join(CROSSNODE_JSON), &results)?;
    let problems = results.problems();
    for p in &problems {
        cni_ops::progress(&format!("cross-node problem: {p}"));
    }
    Ok(problems.is_empty())
}

/// `--paths` by name (`what` names the kind in the error).
fn parse_paths<T>(
    names: &[String],
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
    known: &[impl AsRef<str>],
) -> Result<Vec<T>, BenchError> {
    names
        .iter()
        .map(|name| {
            parse(name).ok_or_else(|| BenchError::Input {
                what: format!(
                    "--paths: no {what} {name:?} (known: {})",
                    known
                        .iter()
                        .map(AsRef::as_ref)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
        })
        .collect()
}

fn policy_part(a: &RunArgs) -> Result<(), BenchError> {
    let opts = if a.quick {
        PolicyOptions::quick()
    } else {
        PolicyOptions::full()
    };
    let exe =
        std::env::current_exe().map_err(|e| BenchError::io("current_exe", "/proc/self/exe", e))?;
    let results = policy::run(&opts, &exe)?;
    write_json(&a.report.out.join(POLICY_JSON), &results)
}

fn report_part(r: &ReportArgs) -> Result<(), BenchError> {
    let info: Option<RunInfo> = read_json(&r.out.join(RUN_JSON))?;
    let cni: Option<CniResults> = read_json(&r.out.join(CNI_JSON))?;
    let dataplane: Option<DataplaneResults> = read_json(&r.out.join(DATAPLANE_JSON))?;
    let crossnode: Option<CrossNodeResults> = read_json(&r.out.join(CROSSNODE_JSON))?;
    let policy: Option<PolicyResults> = read_json(&r.out.join(POLICY_JSON))?;
    let policy_cluster: Option<policy::RealCluster> =
        read_json(&r.out.join(policy::real_cluster::FILE))?;
    let mut node_scale = Vec::new();
    for file in sarena_benches::k8s_scale::FILES {
        if let Some(run) = read_json::<sarena_benches::k8s_scale::NodeScale>(&r.out.join(file))? {
            node_scale.push(run);
        }
    }
    let kubelet_pods: Option<sarena_benches::k8s_pods::KubeletPods> =
        read_json(&r.out.join(sarena_benches::k8s_pods::FILE))?;
    if cni.is_none()
        && kubelet_pods.is_none()
        && dataplane.is_none()
        && crossnode.is_none()
        && policy.is_none()
        && policy_cluster.is_none()
        && node_scale.is_empty()
    {
        return Err(BenchError::Input {
            what: format!(
                "no results in {} (run `sarena-bench all` first)",
                r.out.display()
            ),
        });
    }
    let (quick, command, machine) = match info {
        Some(i) => (i.quick, r.command.clone().unwrap_or(i.command), i.machine),
        None => (false, command_line(r), report::machine::collect(None)),
    };
    let inputs = ReportInputs {
        cni,
        dataplane,
        crossnode,
        policy,
        policy_cluster,
        node_scale,
        kubelet_pods,
        criterion: report::criterion::gather(&r.criterion),
        machine,
        command,
        quick,
    };
    let docs = r.docs.clone().unwrap_or_else(|| r.out.clone());
    for f in report::write(&docs, &inputs)? {
        cni_ops::progress(&format!("wrote {}", f.display()));
    }
    Ok(())
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(value).map_err(|source| BenchError::Json {
        what: path.display().to_string(),
        source,
    })?;
    std::fs::write(path, text).map_err(|e| BenchError::io("write", path, e))
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, BenchError> {
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::io("read", path, e))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|source| BenchError::Json {
            what: path.display().to_string(),
            source,
        })
}
