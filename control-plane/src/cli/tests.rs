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
            wait: false
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
    assert!(with(&[]).is_err(), "a DSN source is required");
    assert!(
        with(&["--postgres", "postgres://y", "--postgres-stdin"]).is_err(),
        "only one source"
    );
}
