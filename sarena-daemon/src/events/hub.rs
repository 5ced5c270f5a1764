//! Where resolved events go: a bounded recent history (`sarena monitor
//! --since`) and a broadcast to the clients streaming them. Nothing here
//! grows with the event rate: the history holds at most its capacity, and a
//! client that reads too slowly misses events (counted, and told so) rather
//! than holding them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sarena_core::api::EventRecord;
use tokio::sync::broadcast;

/// Events kept for `--since` by default.
pub const DEFAULT_HISTORY: usize = 10_000;
/// Events a streaming client may fall behind by before it misses some.
const CLIENT_BACKLOG: usize = 4_096;

/// The history and the broadcast.
#[derive(Debug)]
pub struct Hub {
    history: Mutex<VecDeque<Arc<EventRecord>>>,
    capacity: usize,
    tx: broadcast::Sender<Arc<EventRecord>>,
    lost_slow_client: AtomicU64,
}

impl Hub {
    /// A hub keeping the last `capacity` events.
    pub fn new(capacity: usize) -> Hub {
        let (tx, _) = broadcast::channel(CLIENT_BACKLOG);
        Hub {
            history: Mutex::new(VecDeque::with_capacity(capacity.min(1024))),
            capacity,
            tx,
            lost_slow_client: AtomicU64::new(0),
        }
    }

    fn history(&self) -> MutexGuard<'_, VecDeque<Arc<EventRecord>>> {
        // the history is a plain queue: whatever a panic left is usable
        self.history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keeps `event` and sends it to every streaming client.
    pub fn publish(&self, event: EventRecord) {
        let event = Arc::new(event);
        if self.capacity > 0 {
            let mut history = self.history();
            if history.len() >= self.capacity {
                history.pop_front();
            }
            history.push_back(event.clone());
        }
        // no client: nothing to send to
        let _ = self.tx.send(event);
    }

    /// A new client: the kept events of the last `since` (none without),
    /// oldest first, and the live ones after them.
    pub fn subscribe(
        &self,
        since: Option<Duration>,
        now_unix_ns: u64,
    ) -> (Vec<Arc<EventRecord>>, broadcast::Receiver<Arc<EventRecord>>) {
        // subscribed under the history's lock: no event is in both, none in neither
        let history = self.history();
        let rx = self.tx.subscribe();
        let past = match since {
            Some(since) => {
                let from =
                    now_unix_ns.saturating_sub(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX));
                history
                    .iter()
                    .filter(|e| e.time_unix_ns >= from)
                    .cloned()
                    .collect()
            }
            None => Vec::new(),
        };
        (past, rx)
    }

    /// Counts events a client missed.
    pub fn missed(&self, n: u64) {
        self.lost_slow_client.fetch_add(n, Ordering::Relaxed);
    }

    /// Events clients missed so far.
    pub fn lost_slow_client(&self) -> u64 {
        self.lost_slow_client.load(Ordering::Relaxed)
    }

    /// Clients streaming now.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }

    /// Events in the history now.
    pub fn kept(&self) -> usize {
        self.history().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sarena_core::api::{EventDirection, EventKind, PacketSummary};

    fn event(t: u64) -> EventRecord {
        EventRecord {
            time_unix_ns: t,
            kind: EventKind::Drop,
            direction: EventDirection::Egress,
            reason: Some("spoofed_source".into()),
            path: None,
            pod: None,
            namespace: None,
            interface: None,
            ifindex: 1,
            peer_pod: None,
            packet_len: 60,
            packet: PacketSummary::default(),
            policy: None,
        }
    }

    #[test]
    fn the_history_keeps_the_newest_and_since_selects_by_time() {
        let hub = Hub::new(3);
        for t in 1..=5 {
            hub.publish(event(t * 1_000_000_000));
        }
        assert_eq!(hub.kept(), 3);
        let (past, _) = hub.subscribe(Some(Duration::from_secs(2)), 6_000_000_000);
        let times: Vec<u64> = past
            .iter()
            .map(|e| e.time_unix_ns / 1_000_000_000)
            .collect();
        assert_eq!(times, [4, 5]);
        let (past, _) = hub.subscribe(None, 6_000_000_000);
        assert!(past.is_empty());
    }

    #[tokio::test]
    async fn a_client_gets_live_events_and_a_slow_one_is_told_what_it_missed() {
        let hub = Hub::new(0);
        let (_, mut rx) = hub.subscribe(None, 0);
        assert_eq!(hub.subscribers(), 1);
        hub.publish(event(1));
        assert_eq!(rx.recv().await.unwrap().time_unix_ns, 1);
        for t in 0..(CLIENT_BACKLOG as u64 + 10) {
            hub.publish(event(t));
        }
        match rx.recv().await {
            Err(broadcast::error::RecvError::Lagged(n)) => assert_eq!(n, 10),
            other => panic!("expected a lag, got {other:?}"),
        }
        drop(rx);
        assert_eq!(hub.subscribers(), 0);
    }
}
