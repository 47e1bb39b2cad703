//! Administrator connections to shard instances: the shard's registered
//! DSN with its user and password replaced by `MOVE_ADMIN_USER` /
//! `MOVE_ADMIN_PASSWORD` (a superuser: PostgreSQL 15 wants one for
//! subscriptions and `FOR TABLES IN SCHEMA`). Every session runs in UTC.

use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context};
use cluster_protocol::control::Shard;
use tokio_postgres::config::{Host, TargetSessionAttrs};
use tokio_postgres::{Client, Config};

use super::sql::quote_literal;
use crate::config::MoveConfig;

/// How long connecting to a shard instance may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connected admin session; the connection task ends with it.
pub struct Admin {
    pub client: Client,
    pub shard: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Admin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::ops::Deref for Admin {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

/// The shard's DSN as the administrator.
pub fn config(dsn: &str, knobs: &MoveConfig) -> anyhow::Result<Config> {
    let mut cfg = Config::from_str(dsn).context("parse the shard's postgres DSN")?;
    cfg.user(&knobs.admin_user);
    match &knobs.admin_password {
        Some(p) => cfg.password(p.expose()),
        // A password of the shard's own role must not be offered as the admin's.
        None => cfg.password(Vec::<u8>::new()),
    };
    cfg.connect_timeout(CONNECT_TIMEOUT);
    cfg.application_name("control-plane-mover");
    knobs.pg_tls.apply(&mut cfg);
    Ok(cfg)
}

pub async fn connect(shard: &Shard, knobs: &MoveConfig) -> anyhow::Result<Admin> {
    let cfg = config(&shard.postgres, knobs)?;
    let (client, conn) = cfg
        .connect(knobs.pg_tls.clone())
        .await
        .with_context(|| format!("connect to shard {} as administrator", shard.name))?;
    let name = shard.name.clone();
    let task = tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(shard = name, error = %e, "admin connection ended");
        }
    });
    // Synchronous commit whatever the instance's default: the walsender
    // sends only flushed WAL, so an asynchronous commit of a probe marker
    // would reach the target only when the WAL writer next flushes (up to
    // a few hundred ms on an idle instance), and catch-up would read that
    // as replication lag that never fits the budget.
    client
        .batch_execute("SET TimeZone = 'UTC'; SET synchronous_commit = on")
        .await
        .context("set up the admin session")?;
    Ok(Admin {
        client,
        shard: shard.name.clone(),
        task,
    })
}

/// A libpq connection string (`key='value' ...`) for `CREATE SUBSCRIPTION`
/// on another instance: the subscriber connects to the publisher with it.
///
/// It never holds a password: PostgreSQL logs a failed statement's text,
/// and keeps the conninfo in `pg_subscription`. The subscriber's server
/// reads the password from `passfile` (`MOVE_REPLICATION_PASSFILE`, a
/// libpq password file on the target instance's host), or the publisher
/// authenticates it without one (docs/moves.md, "Administrator connections").
pub fn conninfo(cfg: &Config, passfile: Option<&str>) -> anyhow::Result<String> {
    let mut parts = Vec::new();
    let hosts = cfg
        .get_hosts()
        .iter()
        .map(host_name)
        .collect::<anyhow::Result<Vec<_>>>()?;
    if hosts.is_empty() {
        bail!("the shard's DSN names no host");
    }
    // Every host of a replicated instance (HA: primary and standby), in the
    // DSN's order: libpq tries them in turn, so the subscription follows
    // the publisher's primary after a failover.
    parts.push(("host", hosts.join(",")));
    let ports = cfg.get_ports();
    if !ports.is_empty() {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        parts.push(("port", ports.join(",")));
    }
    if let Some(db) = cfg.get_dbname() {
        parts.push(("dbname", db.to_string()));
    }
    if let Some(user) = cfg.get_user() {
        parts.push(("user", user.to_string()));
    }
    if let Some(file) = passfile.filter(|f| !f.is_empty()) {
        parts.push(("passfile", file.to_string()));
    }
    match cfg.get_target_session_attrs() {
        TargetSessionAttrs::Any => {}
        TargetSessionAttrs::ReadWrite => {
            parts.push(("target_session_attrs", "read-write".to_string()))
        }
        TargetSessionAttrs::ReadOnly => {
            parts.push(("target_session_attrs", "read-only".to_string()))
        }
        other => bail!("unsupported target_session_attrs {other:?} in the shard's DSN"),
    }
    Ok(parts
        .iter()
        .map(|(k, v)| format!("{k}={}", libpq_value(v)))
        .collect::<Vec<_>>()
        .join(" "))
}

/// One host of a conninfo's comma-separated `host` list.
fn host_name(host: &Host) -> anyhow::Result<String> {
    let name = match host {
        Host::Tcp(h) => h.clone(),
        #[cfg(unix)]
        Host::Unix(p) => p.to_string_lossy().into_owned(),
    };
    if name.contains(',') {
        bail!("a host of the shard's DSN contains a comma: {name}");
    }
    Ok(name)
}

/// A conninfo value: single-quoted, `\` and `'` escaped with a backslash.
fn libpq_value(v: &str) -> String {
    format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// The conninfo of the subscription to `source_dsn`, as a literal for DDL.
pub fn conninfo_literal(source_dsn: &str, knobs: &MoveConfig) -> anyhow::Result<String> {
    let cfg = config(source_dsn, knobs)?;
    let passfile = knobs.replication_passfile.as_deref();
    Ok(quote_literal(&conninfo(&cfg, passfile)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn knobs(password: Option<&str>) -> MoveConfig {
        MoveConfig {
            admin_user: "postgres".into(),
            admin_password: password.map(Secret::new),
            ..MoveConfig::default()
        }
    }

    #[test]
    fn admin_replaces_user_and_password() {
        let cfg = config(
            "postgres://tabula_shard:secret@127.0.0.1:28402/cluster",
            &knobs(None),
        )
        .unwrap();
        assert_eq!(cfg.get_user(), Some("postgres"));
        assert_eq!(cfg.get_password(), Some(&b""[..]));
        assert_eq!(
            conninfo(&cfg, None).unwrap(),
            "host='127.0.0.1' port='28402' dbname='cluster' user='postgres'"
        );
    }

    #[test]
    fn conninfo_names_every_host_and_port_and_asks_for_the_primary() {
        let cfg = config(
            "postgres://tabula_shard@127.0.0.1:26011,127.0.0.1:26041/cluster?target_session_attrs=read-write",
            &knobs(None),
        )
        .unwrap();
        assert_eq!(
            conninfo(&cfg, Some("/p")).unwrap(),
            "host='127.0.0.1,127.0.0.1' port='26011,26041' dbname='cluster' user='postgres' \
             passfile='/p' target_session_attrs='read-write'"
        );
    }

    #[test]
    fn conninfo_keeps_a_single_port_for_many_hosts() {
        let cfg = config(
            "host=db-a,db-b port=5433 dbname=cluster user=x",
            &knobs(None),
        )
        .unwrap();
        assert_eq!(
            conninfo(&cfg, None).unwrap(),
            "host='db-a,db-b' port='5433' dbname='cluster' user='postgres'"
        );
    }

    #[test]
    fn conninfo_escapes_and_quotes() {
        let cfg = config(
            "host=db.internal port=5433 dbname=cluster user=x",
            &knobs(Some("pw")),
        )
        .unwrap();
        let info = conninfo(&cfg, Some("/etc/p'w\\d")).unwrap();
        assert_eq!(
            info,
            "host='db.internal' port='5433' dbname='cluster' user='postgres' passfile='/etc/p\\'w\\\\d'"
        );
    }

    /// PostgreSQL logs a failed statement's text: the subscription's
    /// conninfo names the passfile, never a password.
    #[test]
    fn the_subscription_conninfo_carries_no_password() {
        let dsn = "postgres://tabula_shard:own-pw@db:5432/cluster";
        let mut k = knobs(Some("s3cr3t-pw"));
        k.replication_passfile = Some("/etc/tabula/replication/pgpass".into());
        let lit = conninfo_literal(dsn, &k).unwrap();
        assert!(
            !lit.contains("s3cr3t-pw") && !lit.contains("own-pw"),
            "{lit}"
        );
        assert!(!lit.contains("password"), "{lit}");
        assert!(
            lit.contains("passfile=''/etc/tabula/replication/pgpass''"),
            "{lit}"
        );
        k.replication_passfile = None;
        assert_eq!(
            conninfo_literal(dsn, &k).unwrap(),
            "'host=''db'' port=''5432'' dbname=''cluster'' user=''postgres'''"
        );
    }

    #[test]
    fn bad_dsn_is_an_error() {
        assert!(config("not a dsn ===", &knobs(None)).is_err());
    }
}
