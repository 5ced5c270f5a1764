//! `sarena monitor`: the daemon's drop and flow events as they happen (one
//! line each, or the API's JSON line), and `monitor config`.

use std::io::Write;
use std::ops::ControlFlow;
use std::time::Duration;

use sarena_core::api::{
    EventFilter, EventLine, EventRecord, EventsChange, EventsSettings, FlowMode, HttpDaemon,
};

use crate::cli::{MonitorArgs, OutputFormat};
use crate::error::CliError;

/// `90s`, `5m`, `1h`, `2d`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (digits, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, ""), |i| s.split_at(i));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 90s, 5m or 1h"))?;
    let factor = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: the unit is s, m, h or d")),
    };
    Ok(Duration::from_secs(n.saturating_mul(factor)))
}

/// `on` or `off`.
pub fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        _ => Err(format!("{s:?} is not on or off")),
    }
}

/// `off`, `new` or `sample`.
pub fn parse_flow_mode(s: &str) -> Result<FlowMode, String> {
    match s {
        "off" => Ok(FlowMode::Off),
        "new" => Ok(FlowMode::New),
        "sample" => Ok(FlowMode::Sample),
        _ => Err(format!("{s:?} is not off, new or sample")),
    }
}

/// The filter `args` ask for.
pub fn filter(args: &MonitorArgs) -> EventFilter {
    EventFilter {
        drops: args.drops,
        flows: args.flows,
        pod: args.pod.clone(),
        namespace: args.namespace.clone(),
        reasons: args.reason.clone(),
        since: args.since,
        follow: !args.no_follow,
    }
}

/// `HH:MM:SS.mmm` (UTC) of a Unix time in nanoseconds.
fn clock(unix_ns: u64) -> String {
    let ms = unix_ns / 1_000_000;
    let secs = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
        ms % 1000
    )
}

/// One event as `sarena monitor` prints it.
pub fn event_line(event: &EventRecord) -> String {
    format!("{} {event}", clock(event.time_unix_ns))
}

/// Streams the events `args` ask for into `out` until the daemon ends the
/// stream (it stopped; or, with `--no-follow`, the kept events were all).
pub async fn stream(
    daemon: &HttpDaemon,
    output: OutputFormat,
    args: &MonitorArgs,
    out: &mut dyn Write,
) -> Result<String, CliError> {
    let mut write_err = None;
    let mut emit = |text: String| {
        let written = writeln!(out, "{text}").and_then(|()| out.flush());
        match written {
            Ok(()) => ControlFlow::Continue(()),
            // the reader went away (`| head`): stop quietly
            Err(e) => {
                write_err = Some(e);
                ControlFlow::Break(())
            }
        }
    };
    daemon
        .stream_events(&filter(args), |line| match (&line, output) {
            (_, OutputFormat::Json) => emit(serde_json::to_string(&line).unwrap_or_default()),
            (EventLine::Event(e), OutputFormat::Table) => emit(event_line(e)),
            (EventLine::Lost { lost }, OutputFormat::Table) => emit(format!(
                "-- {lost} events missed (this client read too slowly)"
            )),
        })
        .await
        .map_err(|source| CliError::Daemon {
            source: Box::new(source),
        })?;
    if write_err.is_none() && !args.no_follow {
        eprintln!("sarena monitor: the daemon ended the stream (it stopped)");
    }
    Ok(String::new())
}

/// `monitor config`: shows the settings, after `change` when it changes
/// anything.
pub async fn config(
    daemon: &HttpDaemon,
    output: OutputFormat,
    change: EventsChange,
) -> Result<String, CliError> {
    let settings = if change == EventsChange::default() {
        daemon.events_settings().await
    } else {
        daemon.change_events(&change).await
    }
    .map_err(|source| CliError::Daemon {
        source: Box::new(source),
    })?;
    match output {
        OutputFormat::Json => crate::json(&settings),
        OutputFormat::Table => Ok(settings_text(&settings)),
    }
}

fn mode(m: FlowMode) -> &'static str {
    match m {
        FlowMode::Off => "off",
        FlowMode::New => "new",
        FlowMode::Sample => "sample",
    }
}

fn settings_text(s: &EventsSettings) -> String {
    let mut text = format!(
        "drop events:  {}\nflow events:  {}{}\nlimit:        {} events/s per pod, bursts of {}\n",
        if s.drops { "on" } else { "off" },
        mode(s.flows),
        if s.flows == FlowMode::Sample {
            format!(" (1 in {})", s.sample)
        } else {
            String::new()
        },
        s.rate_per_second,
        s.burst
    );
    for w in &s.watched {
        text.push_str(&format!(
            "watched pod:  {} flows {}\n",
            w.pod,
            mode(w.flows)
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_with_their_unit() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn the_clock_is_utc_with_milliseconds() {
        assert_eq!(clock(3_723_004_000_000), "01:02:03.004");
    }

    #[test]
    fn settings_read_as_lines() {
        let s = EventsSettings {
            drops: true,
            flows: FlowMode::Sample,
            sample: 10,
            rate_per_second: 100,
            burst: 200,
            watched: vec![sarena_core::api::WatchedPod {
                pod: "ns/a".into(),
                flows: FlowMode::New,
            }],
        };
        assert_eq!(
            settings_text(&s),
            "drop events:  on\nflow events:  sample (1 in 10)\nlimit:        100 events/s per pod, bursts of 200\nwatched pod:  ns/a flows new\n"
        );
    }
}
