//! Runs an operator command against the control plane's API and prints
//! its result: one JSON object with `--json`, a readable form otherwise
//! (tables for lists, see `table`); errors and exit codes in `report` and
//! `exit`.

use anyhow::Context;
use cluster_protocol::control::client::ControlPlaneClient;
use cluster_protocol::control::{AddShard, CreateKey, DatabaseScope, UpdateKey};
use serde_json::{json, Value};

use super::exit::CliError;
use super::*;

/// What a command produced: the JSON object and its human form, and, for
/// a command that printed its result but did not succeed (a waited move
/// that ended aborted or timed out, aborting a finished move), the error
/// to report after it.
pub(super) struct Output {
    pub json: Value,
    pub text: String,
    pub failure: Option<CliError>,
}

/// A successful output.
pub(super) fn output(json: Value, text: impl Into<String>) -> Output {
    Output {
        json,
        text: text.into(),
        failure: None,
    }
}

fn scope_text(scope: &DatabaseScope) -> String {
    match scope {
        DatabaseScope::All => "all".into(),
        DatabaseScope::Only(ids) => ids.join(","),
    }
}

pub(super) fn to_json<T: serde::Serialize>(v: &T) -> anyhow::Result<Value> {
    Ok(serde_json::to_value(v)?)
}

/// Runs `command` (anything but `serve`) against the control plane of
/// `connection`, prints its result; returns the process exit code.
pub async fn execute(json_out: bool, connection: Connection, command: Command) -> i32 {
    let result = match client(&connection) {
        Ok(c) => run(&c, command).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(out) => report::finish(json_out, &out.json, &out.text, out.failure.as_ref()),
        Err(e) => report::fail(json_out, &e),
    }
}

fn client(connection: &Connection) -> anyhow::Result<ControlPlaneClient> {
    let token = connection
        .control_plane_token
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| CliError::usage("CONTROL_PLANE_TOKEN must be set (or give --token)"))?;
    Ok(ControlPlaneClient::new(
        &connection.control_plane_url,
        token,
    ))
}

async fn run(c: &ControlPlaneClient, command: Command) -> anyhow::Result<Output> {
    match command {
        Command::Serve(_) => Err(CliError::usage("serve is not an operator command").into()),
        Command::Move(args) => moves::move_database(c, args).await,
        Command::Moves(cmd) => moves::moves(c, cmd).await,
        Command::Rebalance {
            dry_run,
            wait,
            waiting,
            abort,
        } => {
            if abort {
                moves::stop_rebalance(c).await
            } else {
                moves::rebalance(c, dry_run, wait.then_some(waiting)).await
            }
        }
        Command::Users(cmd) => users(c, cmd).await,
        Command::Keys(cmd) => keys(c, cmd).await,
        Command::Members(cmd) => members(c, cmd).await,
        Command::Support(cmd) => support(c, cmd).await,
        Command::Shards(cmd) => shards(c, cmd).await,
        Command::Databases(cmd) => databases(c, cmd).await,
        Command::Restores(cmd) => restores::restores(c, cmd).await,
        Command::Quotas(cmd) => quotas::quotas(c, cmd).await,
        Command::Usage(args) => usage::usage(c, args).await,
    }
}

async fn users(c: &ControlPlaneClient, cmd: UsersCmd) -> anyhow::Result<Output> {
    match cmd {
        UsersCmd::Create {
            email,
            name,
            password_stdin,
        } => {
            // Read before anything is created: a bad input changes nothing.
            let password = if password_stdin {
                Some(read_password(std::io::stdin().lock())?)
            } else {
                None
            };
            let u = c.create_user(&email, name.as_deref()).await?;
            if let Some(password) = password {
                c.set_password(&u.id, &password).await.with_context(|| {
                    format!("user {} was created but its password was refused", u.id)
                })?;
            }
            Ok(output(
                json!({ "id": u.id, "email": u.email, "name": u.name }),
                format!("created user {} <{}> ({})", u.id, u.email, u.name),
            ))
        }
        UsersCmd::Suspend { user_id } => {
            let u = c.suspend_user(&user_id, true).await?;
            Ok(output(to_json(&u)?, format!("suspended {}", u.id)))
        }
        UsersCmd::Unsuspend { user_id } => {
            let u = c.suspend_user(&user_id, false).await?;
            Ok(output(to_json(&u)?, format!("unsuspended {}", u.id)))
        }
        UsersCmd::SetPassword { user_id, .. } => {
            let password = read_password(std::io::stdin().lock())?;
            c.set_password(&user_id, &password).await?;
            Ok(output(
                json!({ "ok": true, "user_id": user_id }),
                format!("set the password of {user_id}; their browser sessions ended"),
            ))
        }
        UsersCmd::List { page } => lists::users(c, page).await,
    }
}

/// The first line of `input` without its line end (a password).
pub fn read_password(input: impl std::io::BufRead) -> anyhow::Result<String> {
    use std::io::BufRead;
    let mut line = String::new();
    input
        .take(4096)
        .read_line(&mut line)
        .context("read the password from standard input")?;
    let password = line.trim_end_matches(['\n', '\r']);
    anyhow::ensure!(
        !password.is_empty(),
        "--password-stdin: standard input holds no password"
    );
    Ok(password.to_string())
}

async fn keys(c: &ControlPlaneClient, cmd: KeysCmd) -> anyhow::Result<Output> {
    match cmd {
        KeysCmd::Create {
            user_id,
            name,
            access,
            databases,
        } => {
            let k = c
                .create_key(&CreateKey {
                    user_id,
                    name,
                    access,
                    databases,
                })
                .await?;
            Ok(Output {
                text: format!(
                    "created key {} ({}, {}, databases: {})\ntoken (shown once): {}",
                    k.id,
                    k.name,
                    k.access.as_str(),
                    scope_text(&k.databases),
                    k.token
                ),
                json: to_json(&k)?,
                failure: None,
            })
        }
        KeysCmd::Update {
            key_id,
            access,
            databases,
        } => {
            if access.is_none() && databases.is_none() {
                return Err(
                    CliError::usage("nothing to update: give --access and/or --databases").into(),
                );
            }
            let k = c
                .update_key(
                    &key_id,
                    &UpdateKey {
                        name: None,
                        access,
                        databases,
                    },
                )
                .await?;
            let text = format!(
                "updated {} ({}, databases: {})",
                k.id,
                k.access.as_str(),
                scope_text(&k.databases)
            );
            Ok(output(to_json(&k)?, text))
        }
        KeysCmd::Revoke { key_id } => {
            c.revoke_key(&key_id).await?;
            Ok(output(
                json!({ "id": key_id, "revoked": true }),
                format!("revoked {key_id}"),
            ))
        }
        KeysCmd::List { user_id } => lists::keys(c, &user_id).await,
    }
}

async fn members(c: &ControlPlaneClient, cmd: MembersCmd) -> anyhow::Result<Output> {
    match cmd {
        MembersCmd::Add { target, role } => {
            c.add_member(&target.database_id, &target.user_id, role)
                .await?;
            let text = format!(
                "{} is now {} of {}",
                target.user_id,
                role.as_str(),
                target.database_id
            );
            Ok(output(
                json!({ "database_id": target.database_id, "user_id": target.user_id, "role": role }),
                text,
            ))
        }
        MembersCmd::Remove { target } => {
            c.remove_member(&target.database_id, &target.user_id)
                .await?;
            let text = format!(
                "{} is no longer a member of {}",
                target.user_id, target.database_id
            );
            Ok(output(
                json!({ "database_id": target.database_id, "user_id": target.user_id, "removed": true }),
                text,
            ))
        }
        MembersCmd::List { database_id } => lists::members(c, &database_id).await,
    }
}

async fn support(c: &ControlPlaneClient, cmd: SupportCmd) -> anyhow::Result<Output> {
    match cmd {
        SupportCmd::Grant { target } => {
            c.grant_support(&target.database_id, &target.user_id)
                .await?;
            let text = format!(
                "granted {} support access to {}",
                target.user_id, target.database_id
            );
            Ok(output(
                json!({ "database_id": target.database_id, "user_id": target.user_id, "support": true }),
                text,
            ))
        }
        SupportCmd::Revoke { target } => {
            c.revoke_support(&target.database_id, &target.user_id)
                .await?;
            let text = format!(
                "revoked support access of {} to {}",
                target.user_id, target.database_id
            );
            Ok(output(
                json!({ "database_id": target.database_id, "user_id": target.user_id, "support": false }),
                text,
            ))
        }
    }
}

async fn shards(c: &ControlPlaneClient, cmd: ShardsCmd) -> anyhow::Result<Output> {
    match cmd {
        ShardsCmd::List => {
            let mut list = c.shards().await?;
            for s in &mut list.shards {
                dsn::redact_shard(s);
            }
            let text = if list.shards.is_empty() {
                "no shards".to_string()
            } else {
                table::shards(&list.shards)
            };
            Ok(output(to_json(&list)?, text))
        }
        ShardsCmd::Add {
            name,
            url,
            postgres,
            postgres_env,
            postgres_stdin,
            weight,
        } => {
            let source = dsn::DsnSource {
                argv: postgres,
                env: postgres_env,
                stdin: postgres_stdin,
            };
            let postgres = dsn::resolve(
                source,
                |var| std::env::var(var).ok(),
                std::io::stdin().lock(),
                |warning| eprintln!("{warning}"),
            )?;
            let mut s = c
                .add_shard(&AddShard {
                    name,
                    url,
                    postgres,
                    weight,
                })
                .await?;
            dsn::redact_shard(&mut s);
            Ok(Output {
                text: format!("added shard {}\n{}", s.name, table::shard(&s)),
                json: to_json(&s)?,
                failure: None,
            })
        }
        ShardsCmd::Drain {
            name,
            wait,
            waiting,
            dry_run,
        } => {
            if dry_run {
                moves::drain_plan(c, &name).await
            } else {
                moves::drain(c, &name, wait.then_some(waiting)).await
            }
        }
        ShardsCmd::Activate { name } => moves::activate(c, &name).await,
    }
}

async fn databases(c: &ControlPlaneClient, cmd: DatabasesCmd) -> anyhow::Result<Output> {
    match cmd {
        DatabasesCmd::List { shard, state, page } => lists::databases(c, shard, state, page).await,
        DatabasesCmd::Show { database_id } => {
            let d = c.database(&database_id).await?;
            Ok(Output {
                text: table::database(&d),
                json: to_json(&d)?,
                failure: None,
            })
        }
        DatabasesCmd::Restore(args) => restores::restore(c, args).await,
    }
}
