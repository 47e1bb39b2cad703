//! Point-in-time restores of one database (docs/restore.md): the checks of
//! a request, the job recorded with the new database's allocation in one
//! transaction, and reads. The restorer (`crate::restore`) does the work.

use chrono::{DateTime, Utc};
use cluster_protocol::control::{CreateRestore, DatabaseState, Restore, RestoreList};
use cluster_protocol::ids::{self, Kind};

use super::unknown_database;
use crate::catalog::{databases, restores};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// Most restores `GET /internal/restores` lists.
const LIST_LIMIT: i64 = 1000;
/// Longest `into` name accepted.
const MAX_NAME_CHARS: usize = 1000;

/// The instant and name of a restore request, checked against now and the
/// database's creation; nothing is read or written here.
pub fn check_request(
    req: &CreateRestore,
    now: DateTime<Utc>,
    database_created_at: DateTime<Utc>,
) -> ApiResult<(DateTime<Utc>, Option<String>)> {
    let as_of = DateTime::parse_from_rfc3339(req.as_of.trim())
        .map_err(|_| {
            ApiError::bad_request(format!(
                "as_of must be an RFC 3339 timestamp such as 2026-01-31T12:00:00Z, not {:?}.",
                req.as_of
            ))
        })?
        .with_timezone(&Utc);
    if as_of > now {
        return Err(ApiError::bad_request(format!(
            "as_of {} is in the future (now is {}).",
            as_of.to_rfc3339(),
            now.to_rfc3339()
        )));
    }
    if as_of < database_created_at {
        return Err(ApiError::bad_request(format!(
            "as_of {} is before the database existed (created {}).",
            as_of.to_rfc3339(),
            database_created_at.to_rfc3339()
        )));
    }
    let into = match req.into.as_deref().map(str::trim) {
        None => None,
        Some("") => return Err(ApiError::bad_request("into must not be blank.")),
        Some(name) if name.chars().count() > MAX_NAME_CHARS => {
            return Err(ApiError::bad_request(format!(
                "into must be at most {MAX_NAME_CHARS} characters."
            )))
        }
        Some(name) => Some(name.to_string()),
    };
    Ok((as_of, into))
}

/// Records a restore of `database_id` with its new database's allocation
/// (same owner, normal placement, the owner's database quota applies), or
/// refuses it with nothing made.
pub async fn create(
    state: &AppState,
    database_id: &str,
    req: &CreateRestore,
) -> ApiResult<Restore> {
    if state.moves.restore_scratch_command.is_none() {
        return Err(ApiError::bad_request(
            "Point-in-time restore is not configured: the control plane has no \
             RESTORE_SCRATCH_COMMAND (docs/restore.md).",
        ));
    }
    if !ids::is_valid(Kind::Database, database_id) {
        return Err(unknown_database(database_id));
    }
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    let original = databases::get(&*tx, database_id)
        .await?
        .ok_or_else(|| unknown_database(database_id))?;
    if original.state != DatabaseState::Active {
        return Err(ApiError::conflict(format!(
            "Database {database_id} is still being created: there is nothing to restore."
        )));
    }
    let (as_of, into) = check_request(req, Utc::now(), original.created_at)?;
    let allocation = super::databases::allocate_in(&tx, &original.owner_id).await?;
    let id = ids::new_untagged(Kind::Restore);
    let row = restores::insert(
        &*tx,
        &restores::NewRestore {
            id: &id,
            database_id,
            new_database_id: &allocation.database_id,
            shard: &original.shard,
            as_of,
            into: into.as_deref(),
        },
    )
    .await?;
    tx.commit().await?;
    state
        .redis
        .announce_placement(&allocation.database_id)
        .await;
    state.restorer_wake.notify_one();
    tracing::info!(
        restore_id = id,
        database_id,
        new_database_id = allocation.database_id,
        as_of = %as_of,
        "restore recorded"
    );
    Ok(row.api)
}

pub async fn show(state: &AppState, id: &str) -> ApiResult<Restore> {
    let client = state.session().await?;
    restores::get(&**client, id)
        .await?
        .map(|r| r.api)
        .ok_or_else(|| ApiError::not_found(format!("Unknown restore {id}.")))
}

pub async fn list(state: &AppState) -> ApiResult<RestoreList> {
    let client = state.session().await?;
    let restores = restores::newest(&**client, LIST_LIMIT)
        .await?
        .into_iter()
        .map(|r| r.api)
        .collect();
    Ok(RestoreList { restores })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn req(as_of: &str, into: Option<&str>) -> CreateRestore {
        CreateRestore {
            as_of: as_of.into(),
            into: into.map(str::to_string),
        }
    }

    const NOW: &str = "2026-11-29T03:00:00Z";
    const CREATED: &str = "2026-11-28T00:00:00Z";

    fn check(r: &CreateRestore) -> ApiResult<(DateTime<Utc>, Option<String>)> {
        check_request(r, at(NOW), at(CREATED))
    }

    #[test]
    fn a_past_instant_after_creation_is_accepted() {
        let (as_of, into) = check(&req("2026-11-29T04:00:00+02:00", None)).unwrap();
        assert_eq!(as_of, at("2026-11-29T02:00:00Z"));
        assert_eq!(into, None);
        let (_, into) = check(&req(CREATED, Some("  Copy  "))).unwrap();
        assert_eq!(into.as_deref(), Some("Copy"));
    }

    #[test]
    fn bad_future_and_too_early_instants_are_refused() {
        for (as_of, words) in [
            ("yesterday", "RFC 3339"),
            ("2026-11-29 02:00", "RFC 3339"),
            ("2026-11-29T03:00:01Z", "in the future"),
            ("2026-11-27T23:59:59Z", "before the database existed"),
        ] {
            match check(&req(as_of, None)) {
                Err(ApiError::BadRequest(m)) => assert!(m.contains(words), "{as_of}: {m}"),
                other => panic!("{as_of}: {other:?}"),
            }
        }
    }

    #[test]
    fn blank_and_huge_names_are_refused() {
        assert!(matches!(
            check(&req(NOW, Some("  "))),
            Err(ApiError::BadRequest(_))
        ));
        let huge = "x".repeat(MAX_NAME_CHARS + 1);
        assert!(matches!(
            check(&req(NOW, Some(&huge))),
            Err(ApiError::BadRequest(_))
        ));
    }
}
