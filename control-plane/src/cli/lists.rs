//! The paged and filtered lists: `users list`, `keys list --user`,
//! `members list --database`, `databases list`, `moves list`. A page cut
//! short by `--limit` carries `next_cursor` (JSON) or ends with the
//! `--cursor` to pass for the next one (text).

use cluster_protocol::control::client::ControlPlaneClient;
use cluster_protocol::control::{DatabaseFilter, MoveFilter, Page};

use super::exec::{output, to_json, Output};
use super::{table, PageArgs};

/// The text of a list: its table, "no ..." when empty, and the cursor of
/// the next page when there is one.
pub fn list_text(table: Option<String>, none: &str, next_cursor: Option<&str>) -> String {
    let mut text = table.unwrap_or_else(|| none.to_string());
    if let Some(cursor) = next_cursor {
        text.push_str(&format!("\nmore: pass --cursor {cursor} for the next page"));
    }
    text
}

fn non_empty<T>(items: &[T], render: impl Fn(&[T]) -> String) -> Option<String> {
    (!items.is_empty()).then(|| render(items))
}

pub async fn users(c: &ControlPlaneClient, page: PageArgs) -> anyhow::Result<Output> {
    let list = c
        .users(&Page {
            limit: page.limit,
            cursor: page.cursor,
        })
        .await?;
    let text = list_text(
        non_empty(&list.users, table::users),
        "no users",
        list.next_cursor.as_deref(),
    );
    Ok(output(to_json(&list)?, text))
}

pub async fn keys(c: &ControlPlaneClient, user_id: &str) -> anyhow::Result<Output> {
    let list = c.user_keys(user_id).await?;
    let text = list_text(non_empty(&list.keys, table::keys), "no keys", None);
    Ok(output(to_json(&list)?, text))
}

pub async fn members(c: &ControlPlaneClient, database_id: &str) -> anyhow::Result<Output> {
    let list = c.members(database_id).await?;
    let text = list_text(non_empty(&list.members, table::members), "no members", None);
    Ok(output(to_json(&list)?, text))
}

pub async fn databases(
    c: &ControlPlaneClient,
    shard: Option<String>,
    state: Option<String>,
    page: PageArgs,
) -> anyhow::Result<Output> {
    let list = c
        .databases_where(&DatabaseFilter {
            shard,
            state,
            limit: page.limit,
            cursor: page.cursor,
        })
        .await?;
    let text = list_text(
        non_empty(&list.databases, table::databases),
        "no databases",
        list.next_cursor.as_deref(),
    );
    Ok(output(to_json(&list)?, text))
}

pub async fn moves(c: &ControlPlaneClient, filter: MoveFilter) -> anyhow::Result<Output> {
    let list = c.moves_where(&filter).await?;
    let text = list_text(
        non_empty(&list.moves, table::moves),
        "no moves",
        list.next_cursor.as_deref(),
    );
    Ok(output(to_json(&list)?, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_page_names_its_cursor() {
        assert_eq!(list_text(None, "no moves", None), "no moves");
        assert_eq!(
            list_text(Some("ID\nmov_1".into()), "no moves", Some("mov_1")),
            "ID\nmov_1\nmore: pass --cursor mov_1 for the next page"
        );
    }
}
