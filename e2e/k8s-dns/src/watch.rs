//! [`watch`]: keeps the [`View`] in step with the API server through two
//! kube-rs watchers (every Service, every Endpoints object: list, then
//! watch; re-listed with backoff after an error). A re-list replaces the
//! whole kind at once when it completes, so deleted objects missed while
//! disconnected go away. Readiness is raised after the first complete list
//! of both kinds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use futures_util::StreamExt;
use futures_util::stream::select;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_stream};
use kube::{Api, Client};
use tokio::task::JoinHandle;

use crate::server::SharedView;
use crate::view::{self, Key, View};

/// An event of either watch (boxed: the objects are large).
enum Change {
    Service(Box<Result<Event<Service>, watcher::Error>>),
    Endpoints(Box<Result<Event<Endpoints>, watcher::Error>>),
}

/// One kind's state: the map being rebuilt by a (re-)list, and whether a
/// list has completed once.
struct Listing<T> {
    pending: Option<HashMap<Key, T>>,
    synced: bool,
}

impl<T> Default for Listing<T> {
    fn default() -> Self {
        Self {
            pending: None,
            synced: false,
        }
    }
}

impl<T> Listing<T> {
    /// Applies `event` (converted by `convert`) to `map`: the live map of
    /// the view, or the pending one during a list.
    fn apply<K>(
        &mut self,
        event: Event<K>,
        map: &mut HashMap<Key, T>,
        meta: impl Fn(&K) -> Option<Key>,
        convert: impl Fn(&K) -> Option<T>,
    ) {
        match event {
            Event::Init => self.pending = Some(HashMap::new()),
            Event::InitApply(obj) => {
                if let (Some(pending), Some(key), Some(value)) =
                    (self.pending.as_mut(), meta(&obj), convert(&obj))
                {
                    pending.insert(key, value);
                }
            }
            Event::InitDone => {
                if let Some(pending) = self.pending.take() {
                    *map = pending;
                }
                self.synced = true;
            }
            Event::Apply(obj) => {
                if let Some(key) = meta(&obj) {
                    match convert(&obj) {
                        Some(value) => map.insert(key, value),
                        None => map.remove(&key),
                    };
                }
            }
            Event::Delete(obj) => {
                if let Some(key) = meta(&obj) {
                    map.remove(&key);
                }
            }
        }
    }
}

/// Watches Services and Endpoints in every namespace through `client`,
/// writing `view`; sets `ready` once both kinds are listed. The task runs
/// until both streams end (never, in practice).
pub fn watch(client: Client, view: SharedView, ready: Arc<AtomicBool>) -> JoinHandle<()> {
    let services: Api<Service> = Api::all(client.clone());
    let endpoints: Api<Endpoints> = Api::all(client);
    let config = watcher::Config::default();
    let services = watch_stream(services, config.clone())
        .default_backoff()
        .map(|e| Change::Service(Box::new(e)));
    let endpoints = watch_stream(endpoints, config)
        .default_backoff()
        .map(|e| Change::Endpoints(Box::new(e)));
    tokio::spawn(async move {
        let mut changes = std::pin::pin!(select(services, endpoints));
        let mut svc_listing = Listing::default();
        let mut ep_listing = Listing::default();
        while let Some(change) = changes.next().await {
            let mut v = view.write().unwrap_or_else(PoisonError::into_inner);
            let v: &mut View = &mut v;
            match change {
                Change::Service(service) => match *service {
                    Ok(event) => svc_listing.apply(
                        event,
                        &mut v.services,
                        |s: &Service| view::key_of(&s.metadata),
                        view::service,
                    ),
                    Err(e) => tracing::warn!("watching Services: {e} (retrying)"),
                },
                Change::Endpoints(endpoints) => match *endpoints {
                    Ok(event) => ep_listing.apply(
                        event,
                        &mut v.endpoints,
                        |e: &Endpoints| view::key_of(&e.metadata),
                        |e| Some(view::endpoints(e)),
                    ),
                    Err(e) => tracing::warn!("watching Endpoints: {e} (retrying)"),
                },
            }
            if svc_listing.synced && ep_listing.synced && !ready.load(Ordering::Acquire) {
                tracing::info!(
                    services = v.services.len(),
                    endpoints = v.endpoints.len(),
                    "listed Services and Endpoints; ready"
                );
                ready.store(true, Ordering::Release);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Option<Key> {
        Some(Key::new("ns", s))
    }

    #[test]
    fn a_relist_replaces_the_kind_only_when_complete() {
        let mut listing: Listing<u32> = Listing::default();
        let mut map = HashMap::new();
        let apply = |listing: &mut Listing<u32>, map: &mut HashMap<Key, u32>, e| {
            listing.apply(e, map, |s: &&str| key(s), |s: &&str| Some(s.len() as u32));
        };
        apply(&mut listing, &mut map, Event::Init);
        apply(&mut listing, &mut map, Event::InitApply("a"));
        assert!(map.is_empty() && !listing.synced);
        apply(&mut listing, &mut map, Event::InitDone);
        assert!(listing.synced);
        assert_eq!(map.len(), 1);
        apply(&mut listing, &mut map, Event::Apply("bb"));
        assert_eq!(map.len(), 2);
        // A re-list after a disconnection: "a" was deleted meanwhile.
        apply(&mut listing, &mut map, Event::Init);
        apply(&mut listing, &mut map, Event::InitApply("bb"));
        assert_eq!(map.len(), 2, "the old view serves until the list completes");
        apply(&mut listing, &mut map, Event::InitDone);
        assert_eq!(
            map.keys().cloned().collect::<Vec<_>>(),
            vec![Key::new("ns", "bb")]
        );
        apply(&mut listing, &mut map, Event::Delete("bb"));
        assert!(map.is_empty());
    }
}
