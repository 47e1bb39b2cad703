//! Point-in-time restores of one database (docs/restore.md): the types of
//! the control plane's routes for them and the operator CLI's output.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Where a restore is. `Done` and `Failed` are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestoreState {
    /// Recorded with the new database's allocation (`creating`, invisible).
    Pending,
    /// The scratch instance is being restored from the shard's backups.
    RestoringScratch,
    /// The tenant schema and its catalog rows are copied, re-tagged, into
    /// the new database on its shard (one transaction there).
    Copying,
    /// The new database is active; the scratch instance is dropped.
    Done,
    /// Nothing of the new database is left; the scratch instance is dropped.
    Failed,
}

impl RestoreState {
    pub const ALL: [RestoreState; 5] = [
        RestoreState::Pending,
        RestoreState::RestoringScratch,
        RestoreState::Copying,
        RestoreState::Done,
        RestoreState::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RestoreState::Pending => "pending",
            RestoreState::RestoringScratch => "restoring_scratch",
            RestoreState::Copying => "copying",
            RestoreState::Done => "done",
            RestoreState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// `done` or `failed`.
    pub fn is_finished(self) -> bool {
        matches!(self, RestoreState::Done | RestoreState::Failed)
    }
}

/// `POST /internal/databases/{id}/restore`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateRestore {
    /// RFC 3339 instant the database is brought back to.
    pub as_of: String,
    /// Name of the new database (default: "<name at as_of> (restored <as_of>)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
}

/// A restore as the API and `--json` print it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Restore {
    /// `rst_` + 12 characters.
    pub id: String,
    /// The database restored from (untouched).
    pub database_id: String,
    /// The new database the restore makes (active once `done`).
    pub new_database_id: String,
    /// Its shard.
    pub shard: String,
    pub as_of: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
    pub state: RestoreState,
    /// Rows copied so far (tenant rows and catalog rows).
    pub rows_copied: i64,
    /// Rows the copy will make, counted on the scratch instance (0 before).
    pub rows_total: i64,
    /// Why it failed (or why its last step failed and is retried).
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// `GET /internal/restores`: newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RestoreList {
    pub restores: Vec<Restore>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_two_are_final() {
        for s in RestoreState::ALL {
            assert_eq!(RestoreState::parse(s.as_str()), Some(s));
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
        }
        let finished: Vec<_> = RestoreState::ALL
            .into_iter()
            .filter(|s| s.is_finished())
            .collect();
        assert_eq!(finished, vec![RestoreState::Done, RestoreState::Failed]);
        assert_eq!(RestoreState::parse("aborted"), None);
    }
}
