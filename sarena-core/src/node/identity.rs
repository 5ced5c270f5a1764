//! The registry side of pod identity: reading endpoints and recording an
//! endpoint's [`PodIdentity`] durably (see [`crate::identity`]).

use super::{NodeError, Registry};
use crate::api::{Attachment, Endpoint, PodIdentity};

impl Registry {
    /// Every registered endpoint, ordered by owner.
    pub fn registered_endpoints(&self) -> Result<Vec<Endpoint>, NodeError> {
        self.inner.endpoints()
    }

    /// The endpoint of `owner`, if registered.
    pub fn registered_endpoint(&self, owner: &Attachment) -> Result<Option<Endpoint>, NodeError> {
        self.inner.endpoint(owner)
    }

    /// Records `identity` for `owner`'s endpoint (in the store, then in
    /// memory); the endpoint as it now is, `None` when none is registered.
    pub fn set_identity(
        &self,
        owner: &Attachment,
        identity: &PodIdentity,
    ) -> Result<Option<Endpoint>, NodeError> {
        let mut st = self.inner.lock()?;
        let Some(current) = st.endpoints.get(owner) else {
            return Ok(None);
        };
        if current.spec.identity == *identity {
            return Ok(Some(current.clone()));
        }
        let mut updated = current.clone();
        updated.spec.identity = identity.clone();
        self.inner.store.update_endpoint(&updated)?;
        st.endpoints.insert(owner.clone(), updated.clone());
        tracing::debug!(
            ?owner,
            labels = updated.spec.identity.labels.len(),
            "endpoint identity updated"
        );
        Ok(Some(updated))
    }
}
