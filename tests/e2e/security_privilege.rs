//! Least privilege (issue 13, section 1): the shard nodes and the control
//! plane connect to PostgreSQL as roles that are not superusers, cannot read
//! the server's files, create roles or databases, and own what is in their
//! database; the running services' sessions use those roles.

use e2e_tests::{cluster, postgres_connect};
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// The DSNs the cluster's env file names, with the `application_name` the
/// dev cluster gives the service using each.
fn service_dsns() -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = cluster()
        .var("SHARD_DATABASE_URLS")
        .expect("SHARD_DATABASE_URLS in the env file")
        .split_whitespace()
        .map(|dsn| (dsn.to_string(), "shard-node"))
        .collect();
    assert!(!out.is_empty(), "no shard DSN in the env file");
    out.push((
        cluster()
            .var("CONTROL_PLANE_DATABASE_URL")
            .expect("CONTROL_PLANE_DATABASE_URL in the env file")
            .to_string(),
        "control-plane",
    ));
    out
}

/// Runs `sql` and asserts PostgreSQL refuses it for lack of privilege.
async fn assert_refused(pg: &Client, dsn: &str, sql: &str) {
    match pg.batch_execute(sql).await {
        Ok(()) => panic!("{dsn}: `{sql}` was allowed"),
        Err(e) => assert_eq!(
            e.code(),
            Some(&SqlState::INSUFFICIENT_PRIVILEGE),
            "{dsn}: `{sql}` failed, but not for lack of privilege: {e}"
        ),
    }
}

#[tokio::test]
async fn service_roles_are_not_superusers_and_cannot_reach_files_or_roles() {
    for (dsn, _) in service_dsns() {
        let pg = postgres_connect(&dsn).await;
        let row = pg
            .query_one(
                "SELECT current_user::text, rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls
                   FROM pg_roles WHERE rolname = current_user",
                &[],
            )
            .await
            .unwrap();
        let role: String = row.get(0);
        assert_ne!(role, "postgres", "{dsn} connects as postgres");
        for (i, attribute) in [
            "SUPERUSER",
            "CREATEROLE",
            "CREATEDB",
            "REPLICATION",
            "BYPASSRLS",
        ]
        .iter()
        .enumerate()
        {
            assert!(!row.get::<_, bool>(i + 1), "{dsn}: {role} has {attribute}");
        }
        let memberships: Vec<String> = pg
            .query(
                "SELECT g.rolname::text FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                  WHERE m.member = current_user::regrole",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(
            memberships.is_empty(),
            "{dsn}: {role} is a member of {memberships:?}"
        );

        for sql in [
            "SELECT pg_read_file('postgresql.conf')",
            "SELECT pg_ls_dir('.')",
            "CREATE TEMP TABLE sink (line text); COPY sink FROM '/etc/passwd'",
            "COPY (SELECT 1) TO '/tmp/privilege-test'",
            "COPY (SELECT 1) TO PROGRAM 'true'",
            "CREATE ROLE privilege_test_role",
            "CREATE DATABASE privilege_test_db",
            "ALTER SYSTEM SET work_mem = '1MB'",
            "ALTER ROLE CURRENT_USER SUPERUSER",
        ] {
            assert_refused(&pg, &dsn, sql).await;
        }

        // Everything in its database outside the system schemas is its own,
        // so it can alter what it made (and nothing is left to `postgres`).
        let foreign: Vec<String> = pg
            .query(
                "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE c.relowner <> current_user::regrole
                    AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
                  UNION ALL
                 SELECT n.nspname::text FROM pg_namespace n
                  WHERE n.nspowner <> current_user::regrole
                    AND n.nspname !~ '^pg_' AND n.nspname NOT IN ('information_schema', 'public')",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(foreign.is_empty(), "{dsn}: {role} does not own {foreign:?}");
        let owner: String = pg
            .query_one(
                "SELECT pg_get_userbyid(datdba)::text FROM pg_database WHERE datname = current_database()",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(owner, role, "{dsn}: the database's owner");
    }
}

#[tokio::test]
async fn running_services_connect_as_their_roles() {
    // Make sure each service holds a pooled session: health reads PostgreSQL.
    let http = reqwest::Client::new();
    for url in cluster()
        .var("SHARD_URLS")
        .expect("SHARD_URLS in the env file")
        .split_whitespace()
    {
        let r = http
            .get(format!("{url}/internal/health"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{url} healthy");
    }
    cluster().control_plane.shards().await.expect("list shards");

    for (dsn, application) in service_dsns() {
        let pg = postgres_connect(&dsn).await;
        let role: String = pg
            .query_one("SELECT current_user::text", &[])
            .await
            .unwrap()
            .get(0);
        let sessions: Vec<String> = pg
            .query(
                "SELECT usename::text FROM pg_stat_activity
                  WHERE datname = current_database() AND application_name = $1
                    AND pid <> pg_backend_pid()",
                &[&application],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(
            !sessions.is_empty(),
            "{dsn}: no session of {application} in pg_stat_activity"
        );
        assert!(
            sessions.iter().all(|u| *u == role),
            "{dsn}: {application} sessions run as {sessions:?}, expected {role}"
        );
    }

    // The DSNs registered with the control plane (moves and tools use them)
    // are the env file's, so they use the shard role too.
    let env_dsns = service_dsns();
    for shard in cluster().control_plane.shards().await.unwrap().shards {
        assert!(
            env_dsns.iter().any(|(d, _)| *d == shard.postgres),
            "registered DSN of {} ({}) is not in SHARD_DATABASE_URLS",
            shard.name,
            shard.postgres
        );
    }
}
