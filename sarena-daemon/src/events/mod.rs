//! Drop and flow events (issue 28): the task that drains the programs' ring
//! buffer, names each event's pod and, for a policy drop, the decision
//! that denied it, and hands it to the [`Hub`] (history and streaming
//! clients); the run-time settings; the counts the status and metrics
//! show. eBPF dataplane only.
//!
//! Nothing here can be driven to unbounded memory by traffic: the programs
//! limit each endpoint's events, the ring buffer is fixed, the reader takes
//! a batch at a time, the history is bounded, and a slow client misses
//! events instead of holding them.

pub mod http;
pub mod hub;
mod resolve;

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use sarena_core::api::{
    EventKind, EventsChange, EventsSettings, EventsStatus, FlowMode, NodeApi, WatchedPod,
    event_record, events_status,
};
use sarena_core::dataplane::DataplaneError;
use sarena_core::dataplane::ebpf::{AyaDataplane, Event, EventReader, events_config};
use tokio::sync::watch;

pub use hub::{DEFAULT_HISTORY, Hub};
use resolve::Resolver;

/// Events read from the ring buffer at once.
const BATCH: usize = 256;
/// The largest one-in-N of sampled flow events.
pub const MAX_SAMPLE: u32 = 1_000_000;

/// The daemon's events, once started ([`install`]).
static INSTALLED: OnceLock<Arc<Events>> = OnceLock::new();

/// Makes `events` what the API serves (once; `false` after).
pub fn install(events: Arc<Events>) -> bool {
    INSTALLED.set(events).is_ok()
}

/// The installed events, if any (none: the kernel dataplane).
pub fn installed() -> Option<&'static Arc<Events>> {
    INSTALLED.get()
}

/// Starts the events of the eBPF dataplane `ebpf` (none: the kernel
/// dataplane, no events) with `cli`'s settings, naming pods through
/// `daemon`, and installs them for the API. A failure is logged: the daemon
/// serves without events.
pub fn start_for(cli: &crate::cli::Cli, ebpf: Option<Arc<AyaDataplane>>, daemon: Arc<dyn NodeApi>) {
    let Some(ebpf) = ebpf else {
        return;
    };
    let options = EventsOptions {
        drops: !cli.events.no_drop_events,
        rate_per_second: cli.events.event_rate,
        burst: cli.events.event_burst,
        history: cli.events.event_history,
    };
    match Events::start(ebpf, daemon, options) {
        Ok(Some(events)) => {
            install(events);
            tracing::info!(?options, "events: drop and flow events ready");
        }
        Ok(None) => tracing::warn!("events: the ring buffer is taken; no events"),
        Err(e) => tracing::warn!(
            "events: cannot start, serving without them: {}",
            sarena_core::error_chain(&e)
        ),
    }
}

/// Ends the installed events' streams (the daemon is stopping).
pub fn close_installed() {
    if let Some(events) = installed() {
        events.close();
    }
}

/// Errors changing the settings.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    /// A field of the change is out of range or inconsistent.
    #[error("{field}: {problem}")]
    BadRequest {
        /// The field.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The pod named has no endpoint on this node.
    #[error("pod {pod}: no endpoint of this node")]
    NoPod {
        /// As given.
        pod: String,
    },
    /// The registry could not be read.
    #[error("cannot read the endpoints")]
    Endpoints(#[source] sarena_core::api::DaemonError),
    /// The maps could not be written or read.
    #[error("the event maps")]
    Dataplane(#[source] DataplaneError),
}

/// The settings, as started: drop events on or off, the per-endpoint limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventsOptions {
    /// Drop events on.
    pub drops: bool,
    /// Events per second per endpoint (0: no limit).
    pub rate_per_second: u32,
    /// Events in a burst per endpoint.
    pub burst: u32,
    /// Events kept for `--since`.
    pub history: usize,
}

/// The events of one daemon.
pub struct Events {
    hub: Hub,
    ebpf: Arc<AyaDataplane>,
    daemon: Arc<dyn NodeApi>,
    settings: Mutex<EventsSettings>,
    /// Set once the daemon stops: every stream ends.
    closed: watch::Sender<bool>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    /// Writes the settings of `options` into the programs' configuration
    /// (flow events off, no endpoint watched), takes the ring buffer and
    /// starts draining it. Within a Tokio runtime. `None` when another
    /// reader took the ring buffer already.
    pub fn start(
        ebpf: Arc<AyaDataplane>,
        daemon: Arc<dyn NodeApi>,
        options: EventsOptions,
    ) -> Result<Option<Arc<Events>>, EventsError> {
        let settings = EventsSettings {
            drops: options.drops,
            flows: FlowMode::Off,
            sample: 100,
            rate_per_second: options.rate_per_second,
            burst: options.burst.max(1),
            watched: Vec::new(),
        };
        // an earlier daemon's watches name endpoints by ifindex: start clean
        for (ifindex, _) in ebpf.flow_watches().map_err(EventsError::Dataplane)? {
            ebpf.set_flow_watch(ifindex, None)
                .map_err(EventsError::Dataplane)?;
        }
        ebpf.set_events_config(events_config(&settings, false))
            .map_err(EventsError::Dataplane)?;
        let Some(reader) = ebpf.take_event_reader().map_err(EventsError::Dataplane)? else {
            return Ok(None);
        };
        let (closed, _) = watch::channel(false);
        let events = Arc::new(Events {
            hub: Hub::new(options.history),
            ebpf,
            daemon: daemon.clone(),
            settings: Mutex::new(settings),
            closed,
        });
        tokio::spawn(drain(events.clone(), reader, Resolver::new(daemon)));
        Ok(Some(events))
    }

    fn settings_lock(&self) -> MutexGuard<'_, EventsSettings> {
        self.settings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Where events go.
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The current settings.
    pub fn settings(&self) -> EventsSettings {
        self.settings_lock().clone()
    }

    /// Ends every stream (the daemon is stopping).
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// A receiver that sees [`Events::close`].
    pub fn closed(&self) -> watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// Applies `change`; every field is checked before anything changes.
    pub async fn change(&self, change: EventsChange) -> Result<EventsSettings, EventsError> {
        if let Some(sample) = change.sample
            && !(1..=MAX_SAMPLE).contains(&sample)
        {
            return Err(EventsError::BadRequest {
                field: "sample",
                problem: format!("{sample} is not between 1 and {MAX_SAMPLE}"),
            });
        }
        let watch = match &change.pod {
            None => None,
            Some(pod) => {
                let Some(flows) = change.flows else {
                    return Err(EventsError::BadRequest {
                        field: "flows",
                        problem: "a pod's change needs its flow mode".to_owned(),
                    });
                };
                Some((self.endpoint_of(pod).await?, pod.clone(), flows))
            }
        };
        let mut settings = self.settings_lock();
        if let Some(drops) = change.drops {
            settings.drops = drops;
        }
        if let Some(sample) = change.sample {
            settings.sample = sample;
        }
        match watch {
            Some(((ifindex, canonical), _, flows)) => {
                let mode = (flows != FlowMode::Off).then_some(flows);
                self.ebpf
                    .set_flow_watch(ifindex, mode)
                    .map_err(EventsError::Dataplane)?;
                settings.watched.retain(|w| w.pod != canonical);
                if let Some(flows) = mode {
                    settings.watched.push(WatchedPod {
                        pod: canonical,
                        flows,
                    });
                }
            }
            None => {
                if let Some(flows) = change.flows {
                    settings.flows = flows;
                }
            }
        }
        self.ebpf
            .set_events_config(events_config(&settings, !settings.watched.is_empty()))
            .map_err(EventsError::Dataplane)?;
        tracing::info!(settings = ?*settings, "events: settings changed");
        Ok(settings.clone())
    }

    /// The host ifindex and canonical name (`namespace/name`) of the
    /// endpoint `pod` names: `namespace/name`, a bare name (one pod only),
    /// or a container id.
    async fn endpoint_of(&self, pod: &str) -> Result<(u32, String), EventsError> {
        let endpoints = self
            .daemon
            .endpoints()
            .await
            .map_err(EventsError::Endpoints)?;
        let mut found = endpoints.iter().filter_map(|ep| {
            let p = &ep.spec.pod;
            let full = match (&p.namespace, &p.name) {
                (Some(ns), Some(name)) => Some(format!("{ns}/{name}")),
                (None, Some(name)) => Some(name.clone()),
                _ => None,
            };
            let hit = full.as_deref() == Some(pod)
                || p.name.as_deref() == Some(pod)
                || ep.spec.owner.container_id == pod;
            hit.then(|| {
                let name = full.unwrap_or_else(|| ep.spec.owner.container_id.clone());
                (ep.spec.host_ifindex, name)
            })
        });
        match (found.next(), found.next()) {
            (Some(one), None) => Ok(one),
            (Some(_), Some(_)) => Err(EventsError::BadRequest {
                field: "pod",
                problem: format!("{pod:?} names more than one pod: give namespace/name"),
            }),
            (None, _) => Err(EventsError::NoPod {
                pod: pod.to_owned(),
            }),
        }
    }

    /// The counts (the programs' and the clients').
    pub fn status(&self) -> Result<EventsStatus, EventsError> {
        let stats = self.ebpf.event_stats().map_err(EventsError::Dataplane)?;
        let mut status = events_status(&stats);
        status.lost_slow_client = self.hub.lost_slow_client();
        status.subscribers = self.hub.subscribers() as u64;
        Ok(status)
    }
}

/// Resolves once [`Events::close`] was called (or the events are gone).
pub async fn until_closed(closed: &mut watch::Receiver<bool>) {
    // the guard `wait_for` returns is dropped here, not held across awaits
    let _ = closed.wait_for(|c| *c).await.map(|_| ());
}

/// Nanoseconds from the monotonic clock (the programs' `bpf_ktime_get_ns`)
/// to the Unix epoch, now.
fn monotonic_to_unix_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec the call fills in.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let mono = if rc == 0 {
        u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000
            + u64::try_from(ts.tv_nsec).unwrap_or(0)
    } else {
        0
    };
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    wall.saturating_sub(mono)
}

/// Drains the ring buffer until the daemon stops: a batch at a time,
/// each event named and published.
async fn drain(events: Arc<Events>, mut reader: EventReader, mut resolver: Resolver) {
    let mut batch: Vec<Event> = Vec::with_capacity(BATCH);
    let mut closed = events.closed();
    loop {
        batch.clear();
        tokio::select! {
            read = reader.read(&mut batch, BATCH) => {
                if let Err(e) = read {
                    tracing::warn!(error = %e, "events: cannot read the ring buffer; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
            () = until_closed(&mut closed) => return,
        }
        let offset = monotonic_to_unix_ns();
        for raw in &batch {
            let mut record = event_record(raw, raw.time_ns.saturating_add(offset));
            resolver.name(&mut record).await;
            if record.kind == EventKind::Drop
                && record
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("policy_denied"))
            {
                resolver.explain(&mut record).await;
            }
            events.hub.publish(record);
        }
    }
}
