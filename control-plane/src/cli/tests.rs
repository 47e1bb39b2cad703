use super::*;

fn parse(args: &[&str]) -> Cli {
    Cli::try_parse_from(std::iter::once("control-plane").chain(args.iter().copied()))
        .expect("parses")
}

#[test]
fn databases_flag_forms() {
    let cli = parse(&[
        "keys",
        "create",
        "--user",
        "usr_x",
        "--name",
        "n",
        "--databases",
        "db_a,db_b",
        "--json",
    ]);
    let Command::Keys(KeysCmd::Create {
        databases, access, ..
    }) = cli.command
    else {
        panic!("keys create")
    };
    assert_eq!(
        databases,
        DatabaseScope::Only(vec!["db_a".into(), "db_b".into()])
    );
    assert_eq!(access, Access::ReadWrite);
    assert!(cli.json);

    let cli = parse(&["keys", "create", "--user", "usr_x", "--name", "n"]);
    let Command::Keys(KeysCmd::Create { databases, .. }) = cli.command else {
        panic!("keys create")
    };
    assert_eq!(databases, DatabaseScope::All);

    let cli = parse(&[
        "--json",
        "keys",
        "update",
        "key_x",
        "--databases",
        "all",
        "--access",
        "read_only",
    ]);
    let Command::Keys(KeysCmd::Update {
        databases, access, ..
    }) = cli.command
    else {
        panic!("keys update")
    };
    assert_eq!(databases, Some(DatabaseScope::All));
    assert_eq!(access, Some(Access::ReadOnly));
}

#[test]
fn bad_values_are_refused() {
    let bad = [
        &[
            "keys",
            "create",
            "--user",
            "u",
            "--name",
            "n",
            "--databases",
            ",",
        ][..],
        &[
            "keys", "create", "--user", "u", "--name", "n", "--access", "rw",
        ][..],
        &[
            "members",
            "add",
            "--database",
            "d",
            "--user",
            "u",
            "--role",
            "boss",
        ][..],
    ];
    for args in bad {
        assert!(
            Cli::try_parse_from(std::iter::once("control-plane").chain(args.iter().copied()))
                .is_err()
        );
    }
}

#[test]
fn operator_contract_parses() {
    parse(&[
        "shards",
        "add",
        "--name",
        "s1",
        "--url",
        "http://x",
        "--postgres",
        "postgres://y",
    ]);
    parse(&["support", "grant", "--database", "db_x", "--user", "usr_y"]);
    parse(&["databases", "list", "--shard", "s1", "--json"]);
    parse(&["move", "db_x", "--to", "s2", "--wait"]);
    parse(&["moves", "abort", "m1"]);
    parse(&["rebalance", "--dry-run"]);
    parse(&["rebalance", "--wait", "--json"]);
    parse(&["shards", "activate", "s1"]);
    parse(&["moves", "list", "--json"]);
    parse(&["moves", "show", "mov_x"]);
}

#[test]
fn scale_out_flags() {
    let cli = parse(&[
        "move",
        "db_x",
        "--to",
        "s2",
        "--pause-budget-ms",
        "250",
        "--step-delay-ms",
        "1000",
    ]);
    let Command::Move(args) = cli.command else {
        panic!("move")
    };
    assert_eq!(args.pause_budget_ms, Some(250));
    assert_eq!(args.step_delay_ms, Some(1000));
    assert!(!args.wait);

    let cli = parse(&["shards", "drain", "s1", "--wait"]);
    assert!(matches!(
        cli.command,
        Command::Shards(ShardsCmd::Drain { wait: true, .. })
    ));
    let cli = parse(&["rebalance", "--dry-run"]);
    assert!(matches!(
        cli.command,
        Command::Rebalance {
            dry_run: true,
            wait: false,
            abort: false,
            ..
        }
    ));

    for bad in [
        &["move", "db_x", "--to", "s2", "--pause-budget-ms", "0"][..],
        &["move", "db_x", "--to", "s2", "--step-delay-ms", "-1"][..],
        &["move", "db_x"][..],
        &["shards", "activate"][..],
    ] {
        assert!(
            Cli::try_parse_from(std::iter::once("control-plane").chain(bad.iter().copied()))
                .is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn the_step_delay_hook_is_hidden() {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let help = cmd
        .find_subcommand_mut("move")
        .expect("move")
        .render_long_help()
        .to_string();
    assert!(help.contains("--pause-budget-ms"));
    assert!(!help.contains("step-delay"));
}

#[test]
fn shards_add_takes_the_dsn_from_exactly_one_place() {
    let base = ["shards", "add", "--name", "s1", "--url", "http://x"];
    let with = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        Cli::try_parse_from(std::iter::once("control-plane").chain(args))
    };
    let Command::Shards(ShardsCmd::Add {
        postgres_env,
        postgres,
        postgres_stdin,
        ..
    }) = with(&["--postgres-env", "SHARD_DSN"])
        .expect("parses")
        .command
    else {
        panic!("shards add")
    };
    assert_eq!(postgres_env.as_deref(), Some("SHARD_DSN"));
    assert!(postgres.is_none() && !postgres_stdin);
    assert!(with(&["--postgres-stdin"]).is_ok());
    assert!(with(&["--postgres", "postgres://y"]).is_ok());
    assert!(with(&[]).is_ok(), "no option: SHARD_DSN");
    let Command::Shards(ShardsCmd::Add { postgres_stdin, .. }) =
        with(&["--dsn-stdin"]).expect("parses").command
    else {
        panic!("shards add")
    };
    assert!(postgres_stdin, "--dsn-stdin is --postgres-stdin");
    assert!(
        with(&["--postgres", "postgres://y", "--postgres-stdin"]).is_err(),
        "only one source"
    );
}

fn refused(args: &[&str]) -> clap::Error {
    Cli::try_parse_from(std::iter::once("control-plane").chain(args.iter().copied()))
        .expect_err("refused")
}

#[test]
fn new_lists_parse_with_their_filters() {
    let cli = parse(&["users", "list", "--limit", "2", "--cursor", "usr_x"]);
    let Command::Users(UsersCmd::List { page }) = cli.command else {
        panic!("users list")
    };
    assert_eq!(
        (page.limit, page.cursor.as_deref()),
        (Some(2), Some("usr_x"))
    );
    parse(&["keys", "list", "--user", "usr_x", "--json"]);
    parse(&["members", "list", "--database", "db_x"]);
    refused(&["keys", "list"]);
    refused(&["members", "list"]);

    let cli = parse(&[
        "databases",
        "list",
        "--shard",
        "s1",
        "--state",
        "active",
        "--limit",
        "10",
    ]);
    let Command::Databases(DatabasesCmd::List { shard, state, page }) = cli.command else {
        panic!("databases list")
    };
    assert_eq!(
        (shard.as_deref(), state.as_deref(), page.limit),
        (Some("s1"), Some("active"), Some(10))
    );
    refused(&["databases", "list", "--state", "gone"]);

    let cli = parse(&[
        "moves",
        "list",
        "--shard",
        "s1",
        "--state",
        "unfinished",
        "--batch",
        "reb_x",
        "--database",
        "db_x",
        "--limit",
        "1000",
    ]);
    let Command::Moves(MovesCmd::List {
        shard,
        state,
        batch,
        database,
        page,
    }) = cli.command
    else {
        panic!("moves list")
    };
    assert_eq!(shard.as_deref(), Some("s1"));
    assert_eq!(state.as_deref(), Some("unfinished"));
    assert_eq!(batch.as_deref(), Some("reb_x"));
    assert_eq!(database.as_deref(), Some("db_x"));
    assert_eq!(page.limit, Some(1000));
    refused(&["moves", "list", "--state", "running"]);
    refused(&["moves", "list", "--limit", "0"]);
    refused(&["moves", "list", "--limit", "1001"]);
}

#[test]
fn wait_takes_a_timeout_and_dry_runs_exclude_waiting() {
    let cli = parse(&["move", "db_x", "--to", "s2", "--wait", "--timeout", "90s"]);
    let Command::Move(args) = cli.command else {
        panic!("move")
    };
    assert_eq!(
        args.waiting.timeout,
        Some(std::time::Duration::from_secs(90))
    );
    let cli = parse(&["shards", "drain", "s1", "--wait", "--timeout", "250ms"]);
    let Command::Shards(ShardsCmd::Drain { waiting, .. }) = cli.command else {
        panic!("drain")
    };
    assert_eq!(waiting.timeout, Some(std::time::Duration::from_millis(250)));
    parse(&["rebalance", "--wait", "--timeout", "5m"]);
    parse(&["move", "db_x", "--to", "s2", "--dry-run"]);
    parse(&["shards", "drain", "s1", "--dry-run", "--json"]);
    for bad in [
        &["move", "db_x", "--to", "s2", "--timeout", "5s"][..],
        &["move", "db_x", "--to", "s2", "--wait", "--timeout", "0s"][..],
        &["move", "db_x", "--to", "s2", "--wait", "--timeout", "soon"][..],
        &["move", "db_x", "--to", "s2", "--wait", "--dry-run"][..],
        &["shards", "drain", "s1", "--wait", "--dry-run"][..],
        &["rebalance", "--abort", "--dry-run"][..],
    ] {
        let e = refused(bad);
        assert_eq!(e.exit_code(), exit::Exit::Usage.code(), "{bad:?}");
    }
}

#[test]
fn moves_abort_takes_one_id_a_batch_or_all() {
    let cli = parse(&["moves", "abort", "mov_x"]);
    assert!(matches!(
        cli.command,
        Command::Moves(MovesCmd::Abort {
            id: Some(_),
            batch: None,
            all: false
        })
    ));
    parse(&["moves", "abort", "--batch", "reb_x"]);
    parse(&["moves", "abort", "--all", "--json"]);
    parse(&["rebalance", "--abort"]);
    refused(&["moves", "abort"]);
    refused(&["moves", "abort", "mov_x", "--all"]);
}

#[test]
fn connection_settings_come_from_flags_or_the_environment_and_show_in_help() {
    use clap::CommandFactory;
    let cli = parse(&["users", "list", "--server", "http://cp:1", "--token", "t"]);
    assert_eq!(cli.connection.control_plane_url, "http://cp:1");
    assert_eq!(cli.connection.control_plane_token.as_deref(), Some("t"));
    let help = Cli::command().render_long_help().to_string();
    assert!(help.contains("CONTROL_PLANE_URL"), "{help}");
    assert!(help.contains("CONTROL_PLANE_TOKEN"), "{help}");
    assert!(help.contains("Exit codes"), "{help}");
    let mut cmd = Cli::command();
    cmd.build();
    let sub = cmd
        .find_subcommand_mut("moves")
        .expect("moves")
        .render_long_help()
        .to_string();
    assert!(sub.contains("CONTROL_PLANE_TOKEN"), "{sub}");
}

#[test]
fn the_cli_definition_is_consistent() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
}
