//! The `placements` table (migration 0006, docs/moves.md "Shard side"):
//! which databases this shard serves, at which epoch, and whether a move
//! of one is under way. The control plane writes it during a move; the
//! node only reads it, except for the row a new database starts with.
//!
//! The write fence: every transaction that writes a database's rows runs
//! [`fence`] first, taking `FOR KEY SHARE` on the database's row here for
//! the rest of the transaction. The control plane changes a row's state
//! with `SELECT ... FOR UPDATE` then `UPDATE`, so it waits for the writers
//! in flight, and a writer that arrives meanwhile waits for it and then
//! reads the new state (READ COMMITTED re-reads a row it waited for).
//!
//! Background workers touch only databases served here (`owned` or
//! `moving`): their own SQL joins `placements` (deliveries, outbox,
//! attachments, tables) and locks the rows it writes through it.

use deadpool_postgres::GenericClient;

use crate::error::{ApiError, ApiResult};

/// 409 of a structural change while the database is `moving`.
pub const MOVING_MESSAGE: &str = "This database is being moved to another shard: changes to \
     its tables, fields and views are refused until the move finishes. Record writes are not \
     affected; retry later.";

/// A placement's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Serving.
    Owned,
    /// Serving; a move copies the database away, so structural changes
    /// are refused.
    Moving,
    /// Cutover: nothing is served, nothing written.
    Fenced,
}

impl State {
    /// `None` for a value the migration's check constraint does not allow.
    pub fn parse(s: &str) -> Option<State> {
        match s {
            "owned" => Some(State::Owned),
            "moving" => Some(State::Moving),
            "fenced" => Some(State::Fenced),
            _ => None,
        }
    }
}

/// What a fenced transaction is about to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Rows of the database: records, trash, webhooks and their
    /// deliveries, uploads, the database's name and colour. Allowed while
    /// the database is `moving`: the move replicates them.
    Write,
    /// Tables, fields, views, or the database itself (delete): DDL that
    /// logical replication does not carry, so refused while `moving`.
    Structure,
}

/// Whether a transaction needing `need` may go on, given the database's
/// placement state (`None`: no row, this shard does not serve it).
pub fn admit(state: Option<State>, need: Need) -> ApiResult<()> {
    match (state, need) {
        (None | Some(State::Fenced), _) => Err(ApiError::Misplaced),
        (Some(State::Moving), Need::Structure) => Err(ApiError::Conflict(MOVING_MESSAGE.into())),
        (Some(State::Owned), _) | (Some(State::Moving), Need::Write) => Ok(()),
    }
}

/// The write fence: run first in every transaction that writes
/// `database_id`'s rows (`c` is that transaction). Holds `FOR KEY SHARE`
/// on the placement until the transaction ends. 421 when the database has
/// no placement here or is fenced (nothing may be written then); 409 for
/// a structural `need` while it is moving.
pub async fn fence(c: &impl GenericClient, database_id: &str, need: Need) -> ApiResult<()> {
    let statement = c
        .prepare_cached("SELECT state FROM placements WHERE database_id = $1 FOR KEY SHARE")
        .await?;
    let row = c.query_opt(&statement, &[&database_id]).await?;
    let state = match row {
        None => None,
        Some(r) => {
            let text: String = r.try_get(0)?;
            Some(State::parse(&text).ok_or_else(|| {
                anyhow::anyhow!("placement of {database_id} in unknown state {text:?}")
            })?)
        }
    };
    admit(state, need)
}

/// The write fence of a record write with what the write needs next, in
/// one statement: `FOR KEY SHARE` on the placement, then on the database
/// row (rows are locked in the order of the FROM list, so in the order
/// [`fence`] then `databases::schema_version_key_share` took them), and
/// the placement's epoch, the schema version and the database's name. 421
/// as [`fence`] for [`Need::Write`].
pub async fn fence_write(c: &impl GenericClient, database_id: &str) -> ApiResult<FencedWrite> {
    let statement = c
        .prepare_cached(
            "SELECT pl.state, pl.epoch, d.schema_version, d.name
               FROM placements pl JOIN databases d ON d.id = pl.database_id
              WHERE pl.database_id = $1 FOR KEY SHARE",
        )
        .await?;
    let Some(row) = c.query_opt(&statement, &[&database_id]).await? else {
        return Err(ApiError::Misplaced);
    };
    let text: String = row.try_get(0)?;
    let state = State::parse(&text)
        .ok_or_else(|| anyhow::anyhow!("placement of {database_id} in unknown state {text:?}"))?;
    admit(Some(state), Need::Write)?;
    Ok(FencedWrite {
        epoch: row.try_get(1)?,
        schema_version: row.try_get(2)?,
        database_name: row.try_get(3)?,
    })
}

/// What [`fence_write`] read under its locks.
#[derive(Debug, Clone)]
pub struct FencedWrite {
    pub epoch: i64,
    pub schema_version: i64,
    pub database_name: String,
}

/// The database's placement state now, without a lock (`None`: no row).
pub async fn state(c: &impl GenericClient, database_id: &str) -> ApiResult<Option<State>> {
    let row = c
        .query_opt(
            "SELECT state FROM placements WHERE database_id = $1",
            &[&database_id],
        )
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let text: String = row.try_get(0)?;
    Ok(Some(State::parse(&text).ok_or_else(|| {
        anyhow::anyhow!("placement of {database_id} in unknown state {text:?}")
    })?))
}

/// The placement a new database starts with: served here (`owned`) at the
/// allocation's epoch. Run in the transaction that creates the database.
pub async fn insert_owned(
    c: &impl GenericClient,
    database_id: &str,
    epoch: i64,
) -> Result<(), tokio_postgres::Error> {
    c.execute(
        "INSERT INTO placements (database_id, epoch, state) VALUES ($1, $2, 'owned')",
        &[&database_id, &epoch],
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_as_the_migration_spells_them() {
        assert_eq!(State::parse("owned"), Some(State::Owned));
        assert_eq!(State::parse("moving"), Some(State::Moving));
        assert_eq!(State::parse("fenced"), Some(State::Fenced));
        assert_eq!(State::parse("Owned"), None);
        assert_eq!(State::parse(""), None);
    }

    #[test]
    fn no_row_or_fenced_is_misplaced_whatever_the_need() {
        for need in [Need::Write, Need::Structure] {
            assert!(matches!(admit(None, need), Err(ApiError::Misplaced)));
            assert!(matches!(
                admit(Some(State::Fenced), need),
                Err(ApiError::Misplaced)
            ));
        }
    }

    #[test]
    fn moving_refuses_structure_only() {
        assert!(admit(Some(State::Moving), Need::Write).is_ok());
        match admit(Some(State::Moving), Need::Structure) {
            Err(ApiError::Conflict(m)) => assert_eq!(m, MOVING_MESSAGE),
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert!(admit(Some(State::Owned), Need::Write).is_ok());
        assert!(admit(Some(State::Owned), Need::Structure).is_ok());
    }

    #[test]
    fn the_moving_message_is_the_design_s() {
        assert_eq!(
            MOVING_MESSAGE,
            "This database is being moved to another shard: changes to its tables, fields and \
             views are refused until the move finishes. Record writes are not affected; retry \
             later."
        );
    }
}
