//! `memberships` and `support_grants`: who may reach which database.

use anyhow::Context;
use cluster_protocol::control::{Member, MemberUser, Membership, Role};

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

const MEMBER_COLUMNS: &str = "u.id, u.name, u.email, m.role, m.created_at";
const MEMBER_FROM: &str = "FROM memberships m JOIN users u ON u.id = m.user_id";

fn role_of_row(raw: &str) -> anyhow::Result<Role> {
    Role::parse(raw).with_context(|| format!("unknown role {raw:?} in catalog"))
}

fn member_of(row: &tokio_postgres::Row) -> anyhow::Result<Member> {
    let raw: String = row.try_get("role")?;
    Ok(Member {
        user: MemberUser {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            email: row.try_get("email")?,
        },
        role: role_of_row(&raw)?,
        created_at: row.try_get("created_at")?,
    })
}

/// The database's members (support grants are not memberships), by
/// `created_at`, then user id.
pub async fn list_members(db: &impl Db, database_id: &str) -> anyhow::Result<Vec<Member>> {
    let sql = format!(
        "SELECT {MEMBER_COLUMNS} {MEMBER_FROM} WHERE m.database_id = $1
         ORDER BY m.created_at, m.user_id"
    );
    db.query(&sql, &[&database_id])
        .await
        .context("list members of database")?
        .iter()
        .map(member_of)
        .collect()
}

pub async fn member(
    db: &impl Db,
    database_id: &str,
    user_id: &str,
) -> anyhow::Result<Option<Member>> {
    let sql = format!(
        "SELECT {MEMBER_COLUMNS} {MEMBER_FROM} WHERE m.database_id = $1 AND m.user_id = $2"
    );
    db.query_opt(&sql, &[&database_id, &user_id])
        .await
        .context("read member")?
        .as_ref()
        .map(member_of)
        .transpose()
}

/// The user's role in the database, if a member.
pub async fn role_of(
    db: &impl Db,
    database_id: &str,
    user_id: &str,
) -> anyhow::Result<Option<Role>> {
    let row = db
        .query_opt(
            "SELECT role FROM memberships WHERE database_id = $1 AND user_id = $2",
            &[&database_id, &user_id],
        )
        .await
        .context("read role")?;
    match row {
        Some(r) => Ok(Some(role_of_row(&r.try_get::<_, String>(0)?)?)),
        None => Ok(None),
    }
}

pub async fn has_support(db: &impl Db, database_id: &str, user_id: &str) -> anyhow::Result<bool> {
    let row = db
        .query_opt(
            "SELECT 1 FROM support_grants WHERE database_id = $1 AND user_id = $2",
            &[&database_id, &user_id],
        )
        .await
        .context("read support grant")?;
    Ok(row.is_some())
}

/// Adds a membership; `false` when the user already is a member.
pub async fn insert(
    db: &impl Db,
    database_id: &str,
    user_id: &str,
    role: Role,
) -> anyhow::Result<bool> {
    let n = db
        .execute(
            "INSERT INTO memberships (database_id, user_id, role) VALUES ($1, $2, $3)
             ON CONFLICT (database_id, user_id) DO NOTHING",
            &[&database_id, &user_id, &role.as_str()],
        )
        .await
        .context("insert membership")?;
    Ok(n > 0)
}

/// Changes a member's role; `false` when the user is not a member.
pub async fn set_role(
    db: &impl Db,
    database_id: &str,
    user_id: &str,
    role: Role,
) -> anyhow::Result<bool> {
    let n = db
        .execute(
            "UPDATE memberships SET role = $3 WHERE database_id = $1 AND user_id = $2",
            &[&database_id, &user_id, &role.as_str()],
        )
        .await
        .context("change member role")?;
    Ok(n > 0)
}

pub async fn count_owners(db: &impl Db, database_id: &str) -> anyhow::Result<i64> {
    let row = db
        .query_one(
            "SELECT count(*) FROM memberships WHERE database_id = $1 AND role = $2",
            &[&database_id, &Role::Owner.as_str()],
        )
        .await
        .context("count owners")?;
    Ok(row.try_get(0)?)
}
