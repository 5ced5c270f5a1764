//! [`IdentityRegistry`] for [`Registry`]: identities are kept with the
//! endpoints, in the store.

use super::{IdentityError, IdentityRegistry};
use crate::api::{Attachment, Endpoint, PodIdentity};
use crate::node::Registry;

impl IdentityRegistry for Registry {
    fn endpoints(&self) -> Result<Vec<Endpoint>, IdentityError> {
        self.registered_endpoints()
            .map_err(|source| IdentityError::Registry { source })
    }

    fn endpoint(&self, owner: &Attachment) -> Result<Option<Endpoint>, IdentityError> {
        self.registered_endpoint(owner)
            .map_err(|source| IdentityError::Registry { source })
    }

    fn set_identity(
        &self,
        owner: &Attachment,
        identity: &PodIdentity,
    ) -> Result<Option<Endpoint>, IdentityError> {
        Registry::set_identity(self, owner, identity)
            .map_err(|source| IdentityError::Registry { source })
    }
}
