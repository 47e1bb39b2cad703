//! The human forms of the CLI's output: aligned tables with a header row
//! for lists, aligned `field  value` lines for one object.

use cluster_protocol::control::{
    DatabaseInfo, DatabaseScope, KeyInfo, Member, Move, PlannedMove, Shard, ShardState, User,
};

/// Columns padded to their widest cell, two spaces apart, header first.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            out.push_str(cell);
            let pad = w.saturating_sub(cell.chars().count());
            out.push_str(&" ".repeat(pad));
        }
        out.trim_end().to_string()
    };
    let mut lines = vec![line(&mut header.iter().copied())];
    for row in rows {
        lines.push(line(&mut row.iter().map(String::as_str)));
    }
    lines.join("\n")
}

/// `name  value` lines, names padded to the longest.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| format!("{k:<width$}  {v}").trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

pub fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

fn shard_state(s: ShardState) -> &'static str {
    match s {
        ShardState::Active => "active",
        ShardState::Draining => "draining",
    }
}

fn database_state(d: &DatabaseInfo) -> String {
    serde_json::to_value(d.state)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// Bytes in binary units, one decimal: `812 B`, `1.5 KiB`, `12.0 GiB`.
pub fn size(bytes: i64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

pub fn shards(list: &[Shard]) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                shard_state(s.state).into(),
                s.weight.to_string(),
                or_dash(s.databases),
                or_dash(s.bytes.map(size)),
                s.url.clone(),
            ]
        })
        .collect();
    table(
        &["NAME", "STATE", "WEIGHT", "DATABASES", "SIZE", "URL"],
        &rows,
    )
}

pub fn users(list: &[User]) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|u| {
            vec![
                u.id.clone(),
                u.email.clone(),
                u.name.clone(),
                if u.suspended { "yes" } else { "no" }.into(),
            ]
        })
        .collect();
    table(&["ID", "EMAIL", "NAME", "SUSPENDED"], &rows)
}

fn scope(s: &DatabaseScope) -> String {
    match s {
        DatabaseScope::All => "all".into(),
        DatabaseScope::Only(ids) => ids.join(","),
    }
}

pub fn keys(list: &[KeyInfo]) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|k| {
            vec![
                k.id.clone(),
                k.name.clone(),
                k.access.as_str().into(),
                scope(&k.databases),
                time(k.created_at),
            ]
        })
        .collect();
    table(&["ID", "NAME", "ACCESS", "DATABASES", "CREATED"], &rows)
}

pub fn members(list: &[Member]) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|m| {
            vec![
                m.user.id.clone(),
                m.user.email.clone(),
                m.user.name.clone(),
                m.role.as_str().into(),
                time(m.created_at),
            ]
        })
        .collect();
    table(&["USER", "EMAIL", "NAME", "ROLE", "SINCE"], &rows)
}

pub fn shard(s: &Shard) -> String {
    fields(&[
        ("name", s.name.clone()),
        ("state", shard_state(s.state).into()),
        ("weight", s.weight.to_string()),
        ("url", s.url.clone()),
        ("postgres", s.postgres.clone()),
    ])
}

pub fn databases(list: &[DatabaseInfo]) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|d| {
            vec![
                d.id.clone(),
                d.tag.clone(),
                d.owner_id.clone(),
                d.shard.clone(),
                database_state(d),
                d.epoch.to_string(),
                d.position.to_string(),
                time(d.created_at),
            ]
        })
        .collect();
    table(
        &[
            "ID", "TAG", "OWNER", "SHARD", "STATE", "EPOCH", "POSITION", "CREATED",
        ],
        &rows,
    )
}

pub fn database(d: &DatabaseInfo) -> String {
    fields(&[
        ("id", d.id.clone()),
        ("tag", d.tag.clone()),
        ("owner_id", d.owner_id.clone()),
        ("shard", d.shard.clone()),
        ("state", database_state(d)),
        ("epoch", d.epoch.to_string()),
        ("position", d.position.to_string()),
        ("created_at", time(d.created_at)),
    ])
}

pub fn moves(list: &[Move]) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|m| {
            vec![
                m.id.clone(),
                m.database_id.clone(),
                m.from.clone(),
                m.to.clone(),
                m.state.as_str().into(),
                or_dash(m.pause_ms),
                time(m.created_at),
                m.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &[
            "ID", "DATABASE", "FROM", "TO", "STATE", "PAUSE_MS", "CREATED", "ERROR",
        ],
        &rows,
    )
}

pub fn one_move(m: &Move) -> String {
    fields(&[
        ("id", m.id.clone()),
        ("database_id", m.database_id.clone()),
        ("from", m.from.clone()),
        ("to", m.to.clone()),
        ("state", m.state.as_str().into()),
        (
            "tables",
            format!(
                "{}/{} copied",
                m.progress.tables_copied, m.progress.tables_total
            ),
        ),
        ("pause_ms", or_dash(m.pause_ms)),
        ("pause_budget_ms", m.pause_budget_ms.to_string()),
        ("attempts", m.attempts.to_string()),
        ("convergence_ms", or_dash(m.convergence_ms)),
        ("error", or_dash(m.error.clone())),
        ("created_at", time(m.created_at)),
        ("updated_at", time(m.updated_at)),
        ("finished_at", or_dash(m.finished_at.map(time))),
        ("batch", or_dash(m.batch.clone())),
    ])
}

pub fn plan(list: &[PlannedMove]) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|p| vec![p.database_id.clone(), p.from.clone(), p.to.clone()])
        .collect();
    table(&["DATABASE", "FROM", "TO"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_under_their_header() {
        let t = table(
            &["ID", "STATE"],
            &[
                vec!["mov_1".into(), "pending".into()],
                vec!["m".into(), "done".into()],
            ],
        );
        assert_eq!(t, "ID     STATE\nmov_1  pending\nm      done");
        assert_eq!(table(&["A", "B"], &[]), "A  B");
    }

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(8 * 1024 * 1024 + 1), "8.0 MiB");
        assert_eq!(size(3 * 1024_i64.pow(3)), "3.0 GiB");
    }

    #[test]
    fn fields_align_their_values() {
        let f = fields(&[("id", "x".into()), ("state", "done".into())]);
        assert_eq!(f, "id     x\nstate  done");
    }
}
