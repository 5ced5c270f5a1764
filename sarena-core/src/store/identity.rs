//! Rewriting one endpoint record in place: how an endpoint's identity
//! (its pod's labels, learned after it registered) is made durable.

use super::{ENDPOINTS, RedbStore, StoreError, encode, key, redb_err};
use crate::api::Endpoint;

impl RedbStore {
    /// Rewrites the record of `endpoint`'s owner with `endpoint`, durably.
    /// The allocation is left as it is.
    pub fn update_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        let bytes = encode("endpoint", endpoint)?;
        self.write("update endpoint", |txn| {
            let mut endpoints = txn.open_table(ENDPOINTS).map_err(redb_err("open table"))?;
            endpoints
                .insert(key(&endpoint.spec.owner), bytes.as_slice())
                .map_err(redb_err("write"))?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PodIdentity;

    /// An endpoint record as daemons before identities (and bandwidth) wrote it.
    const OLD_RECORD: &str = r#"{"owner":{"container_id":"c1","ifname":"eth0"},"pod":{"namespace":"ns","name":"p"},"host_ifname":"lxc1","host_ifindex":7,"host_mac":"02:00:00:00:00:01","pod_mac":"02:00:00:00:00:02","addresses":["10.200.0.2/16"],"netns":"/var/run/netns/x","created_at":42}"#;

    #[test]
    fn an_old_record_loads_without_identity_and_an_identity_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = RedbStore::open(dir.path()).unwrap();
            store
                .write("seed", |txn| {
                    let mut t = txn.open_table(ENDPOINTS).map_err(redb_err("open table"))?;
                    t.insert(("c1", "eth0"), OLD_RECORD.as_bytes())
                        .map_err(redb_err("write"))?;
                    Ok(())
                })
                .unwrap();
        }
        let store = RedbStore::open(dir.path()).unwrap();
        let mut ep = store.load().unwrap().endpoints.remove(0);
        assert!(ep.spec.identity.is_empty() && ep.spec.bandwidth.is_none());
        assert_eq!(ep.created_at, 42);
        // Unchanged, it is written back byte for byte.
        assert_eq!(encode("endpoint", &ep).unwrap(), OLD_RECORD.as_bytes());

        ep.spec.identity = PodIdentity {
            labels: [("app".to_owned(), "web".to_owned())].into(),
            namespace_labels: [("team".to_owned(), "a".to_owned())].into(),
        };
        store.update_endpoint(&ep).unwrap();
        drop(store);
        let store = RedbStore::open(dir.path()).unwrap();
        assert_eq!(store.load().unwrap().endpoints, vec![ep]);
    }
}
