//! Extractors that carry a permission in the database the principal names.
//!
//! Checks, in order: a non-member (no role, no support grant) is 404; a
//! database this shard does not serve is 421 (no placement here, fenced
//! for a move's cutover, or placed at another epoch than the router's:
//! docs/moves.md "Held check"); then a write is refused with,
//! in this precedence, the read-only key, support-grant, viewer and
//! owner-only messages of part C.

use std::marker::PhantomData;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use cluster_protocol::control::{Access as KeyAccess, Allocation, Role};
use cluster_protocol::error::forbidden;
use cluster_protocol::principal::Principal;
use deadpool_postgres::Object;

use crate::auth::Caller;
use crate::catalog;
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::schema::DatabaseSchema;
use crate::state::AppState;

/// A caller cleared for some act in `database_id`, which this shard holds.
#[derive(Debug, Clone)]
pub struct Access {
    pub principal: Principal,
    pub database_id: String,
    /// The database's `schema_version` read by the held check: a read can
    /// take its cached schema model without asking again
    /// (`SchemaCache::get_at`).
    pub schema_version: i64,
}

impl Access {
    pub fn user_id(&self) -> &str {
        &self.principal.user_id
    }

    /// For a route that lets any caller through ([`AnyCaller`]), the checks
    /// every other route makes: a non-member is 404, then `need`'s refusal
    /// (403) as the role extractors give it.
    pub fn require(&self, need: Need) -> ApiResult<()> {
        if self.principal.role.is_none() && !self.principal.support {
            return Err(ApiError::NotFound);
        }
        match refusal(&self.principal, need) {
            Some(message) => Err(ApiError::Forbidden(message)),
            None => Ok(()),
        }
    }

    /// The database named in the path, which must be the principal's.
    pub fn database(&self, path_id: &str) -> ApiResult<&str> {
        if path_id == self.database_id {
            Ok(&self.database_id)
        } else {
            Err(ApiError::NotFound)
        }
    }
}

/// An act only an owner may perform, with its refusal message.
pub trait OwnerAct: Send + Sync + 'static {
    const REFUSAL: &'static str;
    /// No API key may perform the act, whatever the role (part C).
    const REFUSED_TO_KEYS: bool;
}

pub struct DeleteTable;
impl OwnerAct for DeleteTable {
    const REFUSAL: &'static str = forbidden::OWNER_DELETE_TABLE;
    const REFUSED_TO_KEYS: bool = false;
}

pub struct DeleteDatabase;
impl OwnerAct for DeleteDatabase {
    const REFUSAL: &'static str = forbidden::OWNER_DELETE_DATABASE;
    const REFUSED_TO_KEYS: bool = true;
}

/// What an act requires of the caller's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Read,
    Write,
    Owner {
        refusal: &'static str,
        refused_to_keys: bool,
    },
}

/// The 403 for a member whose role or key does not allow `need`.
pub fn refusal(p: &Principal, need: Need) -> Option<&'static str> {
    if need == Need::Read {
        return None;
    }
    if p.access == KeyAccess::ReadOnly {
        return Some(forbidden::KEY_READ_ONLY);
    }
    match (p.role, need) {
        (None, _) => Some(forbidden::SUPPORT_READ_ONLY),
        (Some(Role::Viewer), _) => Some(forbidden::VIEWER),
        (Some(_), Need::Read | Need::Write) => None,
        (Some(Role::Editor), Need::Owner { refusal, .. }) => Some(refusal),
        (
            Some(Role::Owner),
            Need::Owner {
                refusal,
                refused_to_keys,
            },
        ) => {
            // Every request reaching a shard was authenticated by an API key.
            let by_key = !p.key_id.is_empty();
            (refused_to_keys && by_key).then_some(refusal)
        }
    }
}

async fn authorize(parts: &mut Parts, state: &AppState, need: Need) -> ApiResult<Access> {
    let Caller(principal) = Caller::from_request_parts(parts, state).await?;
    if principal.role.is_none() && !principal.support {
        return Err(ApiError::NotFound);
    }
    held(principal, state, need).await
}

/// The database the principal names, which this shard must serve at the
/// principal's epoch (else 421), and the role check of `need`.
async fn held(principal: Principal, state: &AppState, need: Need) -> ApiResult<Access> {
    let Some(database_id) = principal.database_id.clone() else {
        return Err(ApiError::NotFound);
    };
    let held = state
        .db
        .measured(DbOp::DatabaseHeld, async {
            let client = state.db.client_for(&database_id).await?;
            Ok(catalog::databases::held_version(&*client, &database_id, principal.epoch).await?)
        })
        .await?;
    let Some(schema_version) = held else {
        return Err(ApiError::Misplaced);
    };
    if let Some(message) = refusal(&principal, need) {
        return Err(ApiError::Forbidden(message));
    }
    Ok(Access {
        principal,
        database_id,
        schema_version,
    })
}

/// Any member (or a support grant) reading, with the held check sent in
/// the same round trip as the read itself ([`HeldRead::check`]) rather than
/// before it: the hot reads (one record, a list page) take one round trip
/// to PostgreSQL instead of two, on one pooled session instead of two.
pub struct HeldRead {
    pub principal: Principal,
    pub database_id: String,
}

impl FromRequestParts<AppState> for HeldRead {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Caller(principal) = Caller::from_request_parts(parts, state).await?;
        if principal.role.is_none() && !principal.support {
            return Err(ApiError::NotFound);
        }
        let Some(database_id) = principal.database_id.clone() else {
            return Err(ApiError::NotFound);
        };
        Ok(HeldRead {
            principal,
            database_id,
        })
    }
}

/// An editor or owner writing records, with the held check made inside
/// the write's transaction by its fence (`records::write::in_transaction`,
/// [`Held::AtEpoch`]): one pooled session and one statement fewer per
/// write than [`Editor`]. A caller
/// whose role or key refuses the write gets [`Editor`]'s checks in its
/// order (421 before 403).
pub struct HeldWrite {
    pub principal: Principal,
    pub database_id: String,
}

impl FromRequestParts<AppState> for HeldWrite {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Caller(principal) = Caller::from_request_parts(parts, state).await?;
        if principal.role.is_none() && !principal.support {
            return Err(ApiError::NotFound);
        }
        if let Some(message) = refusal(&principal, Need::Write) {
            // A refused write still answers 421 first on a database this
            // shard does not hold.
            held(principal, state, Need::Read).await?;
            return Err(ApiError::Forbidden(message));
        }
        let Some(database_id) = principal.database_id.clone() else {
            return Err(ApiError::NotFound);
        };
        Ok(HeldWrite {
            principal,
            database_id,
        })
    }
}

impl HeldWrite {
    pub fn user_id(&self) -> &str {
        &self.principal.user_id
    }

    /// The held check the write's transaction makes.
    pub fn held(&self) -> Held {
        Held::AtEpoch(self.principal.epoch)
    }
}

/// Whether a write's transaction still has to make the held check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Made before (the request's extractor).
    Checked,
    /// To make at the principal's epoch ([`HeldWrite`]).
    AtEpoch(Option<i64>),
}

impl Held {
    /// Whether a write may go on given the placement's `epoch` (read by
    /// its fence): 421 when the principal was routed at another.
    pub fn admits(self, epoch: i64) -> ApiResult<()> {
        match self {
            Held::AtEpoch(Some(routed)) if routed != epoch => Err(ApiError::Misplaced),
            _ => Ok(()),
        }
    }
}

/// What [`HeldRead::check`] found.
pub enum Checked<T> {
    /// The read started under the current schema version: its outcome.
    Read(ApiResult<T>),
    /// The database is held at this schema version, which is not the one
    /// the read started under (or none started): read under it.
    Stale(i64),
}

impl HeldRead {
    /// The schema model to start the read under: the one the node has
    /// cached for the database, whatever its version.
    pub fn cached(&self, state: &AppState) -> Option<Arc<DatabaseSchema>> {
        state.schemas.latest(&self.database_id)
    }

    /// The held check of [`Reader`] (421 when this shard does not serve
    /// the database at the principal's epoch), pipelined on `client` with
    /// `read`, the read started under schema `version` (`None`: nothing
    /// started). `read` may only read: its outcome is dropped, whatever it
    /// is, when the check fails or finds another version.
    pub async fn check<T>(
        &self,
        client: &Object,
        started: Option<(i64, impl std::future::Future<Output = ApiResult<T>>)>,
    ) -> ApiResult<Checked<T>> {
        let held = async {
            catalog::databases::held_version(client, &self.database_id, self.principal.epoch)
                .await
                .map_err(ApiError::from)?
                .ok_or(ApiError::Misplaced)
        };
        let Some((version, read)) = started else {
            return Ok(Checked::Stale(held.await?));
        };
        let (held, out) = tokio::join!(held, read);
        let now = held?;
        Ok(if now == version {
            Checked::Read(out)
        } else {
            Checked::Stale(now)
        })
    }
}

/// Any caller of a database this shard holds, member or not: only the
/// import preview, where part B does not check membership (the router
/// forwards it with no role). Grants nothing else.
pub struct AnyCaller(pub Access);

impl FromRequestParts<AppState> for AnyCaller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Caller(principal) = Caller::from_request_parts(parts, state).await?;
        held(principal, state, Need::Read).await.map(AnyCaller)
    }
}

/// An anonymous read behind a share link (`Principal::share`): the
/// database the token's tag routed to, held here at the router's epoch.
/// Grants that one read and nothing else (every other extractor goes
/// through [`Caller`], which refuses a share principal).
pub struct ShareReader(pub Access);

impl FromRequestParts<AppState> for ShareReader {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let principal = match parts.extensions.get::<Caller>() {
            Some(Caller(p)) if p.share && p.role.is_none() && !p.support => p.clone(),
            Some(_) => return Err(ApiError::NotFound),
            None => return Err(ApiError::Unauthorized),
        };
        held(principal, state, Need::Read).await.map(ShareReader)
    }
}

/// Any member (or a support grant): reads.
pub struct Reader(pub Access);
/// Editor or owner, read-write key: writes.
pub struct Editor(pub Access);
/// Owner, read-write key: the owner-only act `A`.
pub struct Owner<A: OwnerAct>(pub Access, pub PhantomData<A>);

impl FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        authorize(parts, state, Need::Read).await.map(Reader)
    }
}

impl FromRequestParts<AppState> for Editor {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        authorize(parts, state, Need::Write).await.map(Editor)
    }
}

impl<A: OwnerAct> FromRequestParts<AppState> for Owner<A> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let need = Need::Owner {
            refusal: A::REFUSAL,
            refused_to_keys: A::REFUSED_TO_KEYS,
        };
        authorize(parts, state, need)
            .await
            .map(|a| Owner(a, PhantomData))
    }
}

/// A caller allowed to create a database here: read-write, not narrowed,
/// with the control plane's allocation for this shard.
pub struct Creator {
    pub principal: Principal,
    pub allocation: Allocation,
}

impl FromRequestParts<AppState> for Creator {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Caller(principal) = Caller::from_request_parts(parts, state).await?;
        if principal.access == KeyAccess::ReadOnly {
            return Err(ApiError::Forbidden(forbidden::KEY_READ_ONLY));
        }
        if principal.narrowed {
            return Err(ApiError::Forbidden(forbidden::NARROWED_KEY_CREATE));
        }
        let Some(allocation) = principal.new_database.clone() else {
            return Err(ApiError::Internal(anyhow::anyhow!(
                "POST /api/databases reached the shard without an allocation"
            )));
        };
        if allocation.shard.name != *state.shard_name {
            tracing::warn!(
                allocated_to = %allocation.shard.name,
                "database allocated to another shard"
            );
            return Err(ApiError::Misplaced);
        }
        Ok(Creator {
            principal,
            allocation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(role: Option<Role>, support: bool, access: KeyAccess) -> Principal {
        Principal {
            user_id: "usr_abcdefghijkl".into(),
            key_id: "key_abcdefghijkl".into(),
            access,
            narrowed: false,
            database_id: Some("db_Ab3dZ1234567".into()),
            role,
            support,
            epoch: None,
            new_database: None,
            share: false,
        }
    }

    const DEL_TABLE: Need = Need::Owner {
        refusal: forbidden::OWNER_DELETE_TABLE,
        refused_to_keys: false,
    };
    const DEL_DB: Need = Need::Owner {
        refusal: forbidden::OWNER_DELETE_DATABASE,
        refused_to_keys: true,
    };

    #[test]
    fn require_refuses_non_members_with_404_then_low_roles_with_403() {
        let access = |p: Principal| Access {
            principal: p,
            database_id: "db_Ab3dZ1234567".into(),
            schema_version: 1,
        };
        let stranger = access(principal(None, false, KeyAccess::ReadWrite));
        assert!(matches!(
            stranger.require(Need::Write),
            Err(ApiError::NotFound)
        ));
        assert!(matches!(
            stranger.require(Need::Read),
            Err(ApiError::NotFound)
        ));
        let viewer = access(principal(Some(Role::Viewer), false, KeyAccess::ReadWrite));
        assert!(matches!(
            viewer.require(Need::Write),
            Err(ApiError::Forbidden(forbidden::VIEWER))
        ));
        let editor = access(principal(Some(Role::Editor), false, KeyAccess::ReadWrite));
        assert!(editor.require(Need::Write).is_ok());
    }

    #[test]
    fn write_refusals_in_precedence() {
        use KeyAccess::*;
        let ro_owner = principal(Some(Role::Owner), false, ReadOnly);
        assert_eq!(
            refusal(&ro_owner, Need::Write),
            Some(forbidden::KEY_READ_ONLY)
        );
        assert_eq!(refusal(&ro_owner, Need::Read), None);
        let support = principal(None, true, ReadWrite);
        assert_eq!(
            refusal(&support, Need::Write),
            Some(forbidden::SUPPORT_READ_ONLY)
        );
        assert_eq!(
            refusal(&support, DEL_TABLE),
            Some(forbidden::SUPPORT_READ_ONLY)
        );
        let viewer = principal(Some(Role::Viewer), true, ReadWrite);
        assert_eq!(refusal(&viewer, DEL_TABLE), Some(forbidden::VIEWER));
        let editor = principal(Some(Role::Editor), false, ReadWrite);
        assert_eq!(refusal(&editor, Need::Write), None);
        assert_eq!(
            refusal(&editor, DEL_TABLE),
            Some(forbidden::OWNER_DELETE_TABLE)
        );
        assert_eq!(
            refusal(&editor, DEL_DB),
            Some(forbidden::OWNER_DELETE_DATABASE)
        );
        let owner = principal(Some(Role::Owner), false, ReadWrite);
        assert_eq!(refusal(&owner, DEL_TABLE), None);
        assert_eq!(
            refusal(&owner, DEL_DB),
            Some(forbidden::OWNER_DELETE_DATABASE)
        );
    }
}
