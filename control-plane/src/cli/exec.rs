//! Runs an operator command against the control plane's API and prints
//! its result: one JSON object with `--json`, a readable form otherwise
//! (tables for lists, see `table`).

use cluster_protocol::control::client::ControlPlaneClient;
use cluster_protocol::control::{AddShard, CreateKey, DatabaseScope, UpdateKey};
use serde_json::{json, Value};

use super::*;

/// What a command produced: the JSON object and its human form, and, for
/// a command that printed its result but did not succeed (a waited move
/// that ended aborted, aborting a finished move), the reason.
pub(super) struct Output {
    pub json: Value,
    pub text: String,
    pub failure: Option<String>,
}

fn done(text: impl Into<String>) -> Output {
    Output {
        json: json!({ "ok": true }),
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

/// Runs `command` (anything but `serve`); returns the process exit code.
pub async fn execute(json_out: bool, command: Command) -> i32 {
    match run(command).await {
        Ok(out) => {
            if json_out {
                println!("{}", out.json);
            } else {
                println!("{}", out.text);
            }
            match out.failure {
                Some(reason) => {
                    eprintln!("error: {reason}");
                    1
                }
                None => 0,
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

fn client() -> anyhow::Result<ControlPlaneClient> {
    let url = std::env::var("CONTROL_PLANE_URL").unwrap_or_else(|_| "http://127.0.0.1:8090".into());
    let token = std::env::var("CONTROL_PLANE_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| anyhow::anyhow!("CONTROL_PLANE_TOKEN must be set"))?;
    Ok(ControlPlaneClient::new(&url, &token))
}

async fn run(command: Command) -> anyhow::Result<Output> {
    match command {
        Command::Serve(_) => anyhow::bail!("serve is not an operator command"),
        Command::Move(args) => moves::move_database(&client()?, args).await,
        Command::Moves(cmd) => moves::moves(&client()?, cmd).await,
        Command::Rebalance { dry_run, wait } => moves::rebalance(&client()?, dry_run, wait).await,
        Command::Users(cmd) => users(&client()?, cmd).await,
        Command::Keys(cmd) => keys(&client()?, cmd).await,
        Command::Members(cmd) => members(&client()?, cmd).await,
        Command::Support(cmd) => support(&client()?, cmd).await,
        Command::Shards(cmd) => shards(&client()?, cmd).await,
        Command::Databases(cmd) => databases(&client()?, cmd).await,
        Command::Quotas(cmd) => quotas::quotas(&client()?, cmd).await,
        Command::Usage(args) => usage::usage(&client()?, args).await,
    }
}

async fn users(c: &ControlPlaneClient, cmd: UsersCmd) -> anyhow::Result<Output> {
    match cmd {
        UsersCmd::Create { email, name } => {
            let u = c.create_user(&email, name.as_deref()).await?;
            Ok(Output {
                json: json!({ "id": u.id, "email": u.email, "name": u.name }),
                text: format!("created user {} <{}> ({})", u.id, u.email, u.name),
                failure: None,
            })
        }
        UsersCmd::Suspend { user_id } => {
            let u = c.suspend_user(&user_id, true).await?;
            Ok(done(format!("suspended {}", u.id)))
        }
        UsersCmd::Unsuspend { user_id } => {
            let u = c.suspend_user(&user_id, false).await?;
            Ok(done(format!("unsuspended {}", u.id)))
        }
    }
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
                anyhow::bail!("nothing to update: give --access and/or --databases");
            }
            let k = c
                .update_key(&key_id, &UpdateKey { access, databases })
                .await?;
            Ok(done(format!(
                "updated {} ({}, databases: {})",
                k.id,
                k.access.as_str(),
                scope_text(&k.databases)
            )))
        }
        KeysCmd::Revoke { key_id } => {
            c.revoke_key(&key_id).await?;
            Ok(done(format!("revoked {key_id}")))
        }
    }
}

async fn members(c: &ControlPlaneClient, cmd: MembersCmd) -> anyhow::Result<Output> {
    match cmd {
        MembersCmd::Add { target, role } => {
            c.add_member(&target.database_id, &target.user_id, role)
                .await?;
            Ok(done(format!(
                "{} is now {} of {}",
                target.user_id,
                role.as_str(),
                target.database_id
            )))
        }
        MembersCmd::Remove { target } => {
            c.remove_member(&target.database_id, &target.user_id)
                .await?;
            Ok(done(format!(
                "{} is no longer a member of {}",
                target.user_id, target.database_id
            )))
        }
    }
}

async fn support(c: &ControlPlaneClient, cmd: SupportCmd) -> anyhow::Result<Output> {
    match cmd {
        SupportCmd::Grant { target } => {
            c.grant_support(&target.database_id, &target.user_id)
                .await?;
            Ok(done(format!(
                "granted {} support access to {}",
                target.user_id, target.database_id
            )))
        }
        SupportCmd::Revoke { target } => {
            c.revoke_support(&target.database_id, &target.user_id)
                .await?;
            Ok(done(format!(
                "revoked support access of {} to {}",
                target.user_id, target.database_id
            )))
        }
    }
}

async fn shards(c: &ControlPlaneClient, cmd: ShardsCmd) -> anyhow::Result<Output> {
    match cmd {
        ShardsCmd::List => {
            let list = c.shards().await?;
            let text = if list.shards.is_empty() {
                "no shards".to_string()
            } else {
                table::shards(&list.shards)
            };
            Ok(Output {
                json: to_json(&list)?,
                text,
                failure: None,
            })
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
            let s = c
                .add_shard(&AddShard {
                    name,
                    url,
                    postgres,
                    weight,
                })
                .await?;
            Ok(Output {
                text: format!("added shard {}\n{}", s.name, table::shard(&s)),
                json: to_json(&s)?,
                failure: None,
            })
        }
        ShardsCmd::Drain { name, wait } => moves::drain(c, &name, wait).await,
        ShardsCmd::Activate { name } => moves::activate(c, &name).await,
    }
}

async fn databases(c: &ControlPlaneClient, cmd: DatabasesCmd) -> anyhow::Result<Output> {
    match cmd {
        DatabasesCmd::List { shard } => {
            let list = c.databases(shard.as_deref()).await?;
            let text = if list.databases.is_empty() {
                "no databases".to_string()
            } else {
                table::databases(&list.databases)
            };
            Ok(Output {
                json: to_json(&list)?,
                text,
                failure: None,
            })
        }
        DatabasesCmd::Show { database_id } => {
            let d = c.database(&database_id).await?;
            Ok(Output {
                text: table::database(&d),
                json: to_json(&d)?,
                failure: None,
            })
        }
    }
}
