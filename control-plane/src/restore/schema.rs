//! The tenant schema of the copy: what `mover::schema_copy` read on the
//! scratch instance, every name, expression and definition re-tagged.

use crate::mover::ddl::{Column, Constraint, Index, SchemaCopy, Table};

use super::retag::Retag;

/// `copy` with the original's ids replaced by the copy's. The owner role
/// stays (it is the shard's role, not an id).
pub fn retag(copy: &SchemaCopy, r: &Retag) -> SchemaCopy {
    let opt = |s: &Option<String>| s.as_deref().map(|s| r.string(s));
    SchemaCopy {
        owner: copy.owner.clone(),
        tables: copy
            .tables
            .iter()
            .map(|t| Table {
                name: r.string(&t.name),
                columns: t
                    .columns
                    .iter()
                    .map(|c| Column {
                        name: r.string(&c.name),
                        type_sql: c.type_sql.clone(),
                        collation: c.collation.clone(),
                        not_null: c.not_null,
                        identity: c.identity,
                        generated: opt(&c.generated),
                        default: opt(&c.default),
                    })
                    .collect(),
                key: t.key.iter().map(|k| r.string(k)).collect(),
            })
            .collect(),
        constraints: copy
            .constraints
            .iter()
            .map(|c| Constraint {
                table: r.string(&c.table),
                name: r.string(&c.name),
                kind: c.kind,
                definition: r.string(&c.definition),
            })
            .collect(),
        indexes: copy
            .indexes
            .iter()
            .map(|i| Index {
                name: r.string(&i.name),
                definition: r.string(&i.definition),
            })
            .collect(),
    }
}

/// The columns a copy writes: all but generated ones (PostgreSQL computes
/// those on the target).
pub fn copied_columns(t: &Table) -> Vec<&str> {
    t.columns
        .iter()
        .filter(|c| c.generated.is_none())
        .map(|c| c.name.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str) -> Column {
        Column {
            name: name.into(),
            type_sql: "text".into(),
            collation: None,
            not_null: false,
            identity: None,
            generated: None,
            default: None,
        }
    }

    #[test]
    fn every_name_and_expression_is_retagged() {
        let r = Retag::new("db_AbCdE1234567", "db_XyZ09abcdefg").unwrap();
        let copy = SchemaCopy {
            owner: "tabula_shard".into(),
            tables: vec![Table {
                name: "tbl_AbCdE0000001".into(),
                columns: vec![
                    col("id"),
                    col("fld_AbCdE0000002"),
                    Column {
                        generated: Some("lower(\"fld_AbCdE0000002\")".into()),
                        ..col("fld_AbCdE0000002_sort_prefix")
                    },
                ],
                key: vec!["id".into()],
            }],
            constraints: vec![Constraint {
                table: "lnk_fld_AbCdE0000003".into(),
                name: "lnk_fld_AbCdE0000003_to_fkey".into(),
                kind: 'f',
                definition: "FOREIGN KEY (b) REFERENCES \"db_AbCdE1234567\".\"tbl_AbCdE0000001\"(id)"
                    .into(),
            }],
            indexes: vec![Index {
                name: "uq_fld_AbCdE0000002".into(),
                definition: "CREATE UNIQUE INDEX \"uq_fld_AbCdE0000002\" ON \"db_AbCdE1234567\".\"tbl_AbCdE0000001\" USING btree (\"fld_AbCdE0000002\")".into(),
            }],
        };
        let out = retag(&copy, &r);
        let text = format!("{out:?}");
        assert!(!text.contains("AbCdE"), "{text}");
        assert_eq!(out.owner, "tabula_shard");
        assert_eq!(out.tables[0].name, "tbl_XyZ090000001");
        assert_eq!(
            out.tables[0].columns[2].generated.as_deref(),
            Some("lower(\"fld_XyZ090000002\")")
        );
        assert!(out.constraints[0]
            .definition
            .contains("\"db_XyZ09abcdefg\".\"tbl_XyZ090000001\""));
        assert_eq!(
            copied_columns(&out.tables[0]),
            vec!["id", "fld_XyZ090000002"]
        );
    }
}
