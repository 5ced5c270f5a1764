//! The pod-netns handle cache of [`RtnetlinkLinks`](super::RtnetlinkLinks):
//! one netlink handle per pod netns in use, so an ADD opens each namespace
//! once.
//!
//! Each handle owns a socket inside its netns (which keeps the namespace
//! alive) and a connection task, so the cache is bounded: past its capacity
//! the least recently used handle is dropped, which closes its socket and
//! ends its task. DEL releases the pod's handle at once. Entries are keyed by
//! the netns path *and* the identity (device, inode) of the namespace it
//! named when the handle was made: a path reused for another namespace (a
//! runtime recreating `/var/run/netns/NAME`, a recycled `/proc/PID/ns/net`)
//! never gets the old namespace's handle.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The identity of a network namespace: its nsfs device and inode.
pub(super) type NetnsId = (u64, u64);

/// A bounded least-recently-used map from netns path to handle.
#[derive(Debug)]
pub(super) struct PodHandles<H> {
    capacity: usize,
    clock: u64,
    entries: HashMap<PathBuf, Entry<H>>,
}

#[derive(Debug)]
struct Entry<H> {
    id: NetnsId,
    handle: H,
    used: u64,
}

impl<H: Clone> PodHandles<H> {
    /// An empty cache holding at most `capacity` handles (at least one).
    pub(super) fn new(capacity: usize) -> Self {
        PodHandles {
            capacity: capacity.max(1),
            clock: 0,
            entries: HashMap::new(),
        }
    }

    /// The handle cached for `path`, if it was made for the namespace `id`;
    /// one made for another namespace is dropped.
    pub(super) fn get(&mut self, path: &Path, id: NetnsId) -> Option<H> {
        self.clock += 1;
        let now = self.clock;
        match self.entries.get_mut(path) {
            Some(entry) if entry.id == id => {
                entry.used = now;
                Some(entry.handle.clone())
            }
            Some(_) => {
                self.entries.remove(path);
                None
            }
            None => None,
        }
    }

    /// Caches `handle` for `path` (namespace `id`), dropping the least
    /// recently used handle when full.
    pub(super) fn insert(&mut self, path: PathBuf, id: NetnsId, handle: H) {
        self.clock += 1;
        if !self.entries.contains_key(&path) && self.entries.len() >= self.capacity {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(p, _)| p.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        let used = self.clock;
        self.entries.insert(path, Entry { id, handle, used });
    }

    /// Drops the handle of `path`; `true` when there was one.
    pub(super) fn remove(&mut self, path: &Path) -> bool {
        self.entries.remove(path).is_some()
    }

    /// How many handles are cached.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn hits_need_the_same_namespace() {
        let mut cache = PodHandles::new(4);
        cache.insert(p("/run/netns/a"), (1, 10), "a");
        assert_eq!(cache.get(&p("/run/netns/a"), (1, 10)), Some("a"));
        // The path now names another namespace: a miss, and the stale handle goes.
        assert_eq!(cache.get(&p("/run/netns/a"), (1, 11)), None);
        assert_eq!(cache.len(), 0);
        assert_eq!(cache.get(&p("/run/netns/b"), (1, 10)), None);
    }

    #[test]
    fn the_least_recently_used_handle_is_dropped_when_full() {
        let mut cache = PodHandles::new(2);
        cache.insert(p("a"), (1, 1), 1);
        cache.insert(p("b"), (1, 2), 2);
        assert_eq!(cache.get(&p("a"), (1, 1)), Some(1));
        cache.insert(p("c"), (1, 3), 3);
        assert_eq!(cache.len(), 2);
        assert_eq!(
            cache.get(&p("b"), (1, 2)),
            None,
            "b was the least recently used"
        );
        assert_eq!(cache.get(&p("a"), (1, 1)), Some(1));
        assert_eq!(cache.get(&p("c"), (1, 3)), Some(3));
        // Replacing an entry never evicts another.
        cache.insert(p("c"), (1, 4), 4);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&p("a"), (1, 1)), Some(1));
    }

    #[test]
    fn remove_releases_and_capacity_is_at_least_one() {
        let mut cache = PodHandles::new(0);
        cache.insert(p("a"), (1, 1), 1);
        cache.insert(p("b"), (1, 2), 2);
        assert_eq!(cache.len(), 1);
        assert!(cache.remove(&p("b")));
        assert!(!cache.remove(&p("b")));
        assert_eq!(cache.len(), 0);
    }
}
