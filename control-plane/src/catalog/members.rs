//! `memberships` and `support_grants`: who may reach which database.

use anyhow::Context;
use cluster_protocol::control::{Membership, Role};

use super::Db;

/// Adds a membership or changes its role.
pub async fn upsert(
    db: &impl Db,
    database_id: &str,
    user_id: &str,
    role: Role,
) -> anyhow::Result<()> {
    db.execute(
        "INSERT INTO memberships (database_id, user_id, role) VALUES ($1, $2, $3)
         ON CONFLICT (database_id, user_id) DO UPDATE SET role = EXCLUDED.role",
        &[&database_id, &user_id, &role.as_str()],
    )
    .await
    .context("upsert membership")?;
    Ok(())
}

pub async fn delete(db: &impl Db, database_id: &str, user_id: &str) -> anyhow::Result<bool> {
    let n = db
        .execute(
            "DELETE FROM memberships WHERE database_id = $1 AND user_id = $2",
            &[&database_id, &user_id],
        )
        .await
        .context("delete membership")?;
    Ok(n > 0)
}

pub async fn grant_support(db: &impl Db, database_id: &str, user_id: &str) -> anyhow::Result<()> {
    db.execute(
        "INSERT INTO support_grants (database_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        &[&database_id, &user_id],
    )
    .await
    .context("insert support grant")?;
    Ok(())
}

pub async fn revoke_support(
    db: &impl Db,
    database_id: &str,
    user_id: &str,
) -> anyhow::Result<bool> {
    let n = db
        .execute(
            "DELETE FROM support_grants WHERE database_id = $1 AND user_id = $2",
            &[&database_id, &user_id],
        )
        .await
        .context("delete support grant")?;
    Ok(n > 0)
}

/// Users holding a membership or a support grant on the database.
pub async fn users_of_database(db: &impl Db, database_id: &str) -> anyhow::Result<Vec<String>> {
    let rows = db
        .query(
            "SELECT user_id FROM memberships WHERE database_id = $1
             UNION SELECT user_id FROM support_grants WHERE database_id = $1
             ORDER BY 1",
            &[&database_id],
        )
        .await
        .context("list users of database")?;
    rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
}

/// The user's memberships in active databases, by position.
pub async fn active_memberships(db: &impl Db, user_id: &str) -> anyhow::Result<Vec<Membership>> {
    let rows = db
        .query(
            "SELECT m.database_id, m.role FROM memberships m JOIN databases d ON d.id = m.database_id
             WHERE m.user_id = $1 AND d.state = 'active' ORDER BY d.position",
            &[&user_id],
        )
        .await
        .context("list memberships of user")?;
    rows.iter()
        .map(|r| {
            let raw: String = r.try_get(1)?;
            let role =
                Role::parse(&raw).with_context(|| format!("unknown role {raw:?} in catalog"))?;
            Ok(Membership {
                database_id: r.try_get(0)?,
                role,
            })
        })
        .collect()
}

/// Active databases the user holds a support grant on, by position.
pub async fn active_support(db: &impl Db, user_id: &str) -> anyhow::Result<Vec<String>> {
    let rows = db
        .query(
            "SELECT s.database_id FROM support_grants s JOIN databases d ON d.id = s.database_id
             WHERE s.user_id = $1 AND d.state = 'active' ORDER BY d.position",
            &[&user_id],
        )
        .await
        .context("list support grants of user")?;
    rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
}
