//! Zip entry names of an export: a table's CSV is its name made safe for
//! every unzip tool, with ` (2)`, ` (3)`, ... before `.csv` when names
//! collide (case-insensitively, also with the export's own entries).

use std::collections::HashSet;

/// Entries every export has; a table named like one takes a suffix.
pub const RESERVED: [&str; 4] = [
    "manifest.json",
    "comments.csv",
    "attachments.csv",
    "README.txt",
];

/// Longest stem kept (in characters) before a suffix.
const MAX_STEM: usize = 100;

/// A table name as a file stem: path separators, characters Windows
/// refuses and control characters become `_`, leading and trailing dots
/// and spaces are dropped; `table` when nothing is left.
pub fn safe_stem(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| match c {
            '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|' => '_',
            c if c.is_control() => '_',
            c => c,
        })
        .take(MAX_STEM)
        .collect();
    let trimmed = mapped.trim_matches(|c: char| c == '.' || c.is_whitespace());
    if trimmed.is_empty() {
        "table".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// One CSV entry name per table name, in order, each unique.
pub fn csv_names<'a>(tables: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut taken: HashSet<String> = RESERVED.iter().map(|r| r.to_lowercase()).collect();
    let mut out = Vec::new();
    for name in tables {
        let stem = safe_stem(name);
        let mut n = 1;
        loop {
            let candidate = if n == 1 {
                format!("{stem}.csv")
            } else {
                format!("{stem} ({n}).csv")
            };
            if taken.insert(candidate.to_lowercase()) {
                out.push(candidate);
                break;
            }
            n += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colliding_names_take_suffixes() {
        assert_eq!(
            csv_names(["Tasks", "tasks", "Tasks", "Other"]),
            ["Tasks.csv", "tasks (2).csv", "Tasks (3).csv", "Other.csv"]
        );
    }

    #[test]
    fn reserved_entries_are_not_reused() {
        assert_eq!(
            csv_names(["comments", "attachments"]),
            ["comments (2).csv", "attachments (2).csv"]
        );
    }

    #[test]
    fn unsafe_characters_are_replaced() {
        assert_eq!(safe_stem("../a/b\\c:d"), "_a_b_c_d");
        assert_eq!(safe_stem(" .. "), "table");
        assert_eq!(safe_stem("a\u{0}b"), "a_b");
        assert_eq!(csv_names(["a/b", "a:b"]), ["a_b.csv", "a_b (2).csv"]);
    }
}
