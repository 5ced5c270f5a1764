//! `sarena-test-dns`: the cluster DNS of the e2e test cluster (see the
//! library's documentation). Runs until SIGTERM or SIGINT.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

use clap::Parser;
use hickory_proto::rr::Name;
use sarena_test_dns::records::Zone;
use sarena_test_dns::server::{Resolver, ServerError};
use sarena_test_dns::view::View;
use sarena_test_dns::{client, health, server, watch};
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

/// A cluster DNS for the e2e test cluster (Kubernetes DNS-Based Service
/// Discovery 1.1.0). Not for production: no upstream, no caching, no
/// DNSSEC.
#[derive(Debug, Parser)]
#[command(name = "sarena-test-dns", version)]
struct Cli {
    /// The cluster domain.
    #[arg(long, default_value = "cluster.local")]
    zone: String,
    /// UDP and TCP address for DNS.
    #[arg(long, default_value = "0.0.0.0:1053")]
    listen: SocketAddr,
    /// HTTP address of /healthz (liveness) and /readyz (readiness).
    #[arg(long, default_value = "0.0.0.0:8080")]
    health_listen: SocketAddr,
    /// TTL of every record, in seconds.
    #[arg(long, default_value_t = 5)]
    ttl: u32,
    /// Kubeconfig file; without it, the pod's service account.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("invalid --zone {zone:?}")]
    Zone {
        zone: String,
        #[source]
        source: hickory_proto::ProtoError,
    },
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Health(#[from] health::HealthError),
    #[error(transparent)]
    Kube(#[from] client::ClientError),
    #[error("cannot install the signal handler")]
    Signal {
        #[source]
        source: std::io::Error,
    },
}

fn zone(cli: &Cli) -> Result<Zone, StartError> {
    let zone_error = |source| StartError::Zone {
        zone: cli.zone.clone(),
        source,
    };
    let mut origin = Name::from_ascii(cli.zone.trim_end_matches('.'))
        .map_err(zone_error)?
        .to_lowercase();
    origin.set_fqdn(true);
    let serial = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u32::try_from(d.as_secs()).unwrap_or(1));
    Ok(Zone {
        origin,
        ttl: cli.ttl,
        serial,
    })
}

async fn run(cli: Cli) -> Result<(), StartError> {
    let zone = zone(&cli)?;
    let mut term =
        signal(SignalKind::terminate()).map_err(|source| StartError::Signal { source })?;
    let mut int =
        signal(SignalKind::interrupt()).map_err(|source| StartError::Signal { source })?;
    let (udp, tcp) = server::bind(cli.listen).await?;
    let health_listener = health::bind(cli.health_listen).await?;
    let client = client::connect(cli.kubeconfig.as_deref()).await?;

    let view = Arc::new(RwLock::new(View::default()));
    let ready = Arc::new(AtomicBool::new(false));
    let resolver = Arc::new(Resolver::new(Arc::clone(&view), zone.clone()));
    let watches = watch::watch(client, view, Arc::clone(&ready));
    tokio::spawn(health::serve(health_listener, ready));
    tokio::spawn(server::serve_udp(udp, Arc::clone(&resolver)));
    tokio::spawn(server::serve_tcp(tcp, resolver));
    tracing::info!(zone = %zone.origin, listen = %cli.listen, "serving DNS");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM; exiting"),
        _ = int.recv() => tracing::info!("SIGINT; exiting"),
    }
    watches.abort();
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("sarena-test-dns: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut msg = format!("sarena-test-dns: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                msg.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            eprintln!("{msg}");
            ExitCode::FAILURE
        }
    }
}
