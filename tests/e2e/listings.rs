//! Every listing a member or an admin reads, as a table and as the API's JSON (`--json`), held
//! in snapshots under `tests/e2e/shown/` (see [`crate::shown`]): a changed column, word or field
//! fails here and is reviewed as a diff. The API's own answers, read from the socket as a
//! client library would, are held beside them. `alerts` is left out: what fires depends on this
//! machine's disks and clocks (`monitoring.rs` tests it).

use crate::pool::{Pool, get_raw, s};
use crate::shown::{assert_listed, same_on_every_machine};
use std::time::Duration;

#[test]
fn every_listing_as_a_table_and_as_json() {
    let mut pool = Pool::new("2:t4");
    pool.edit_config(|t| same_on_every_machine(&t));
    pool.start();
    // Something in each listing: a finished job, a running one, one waiting for its GPUs, an
    // account with a limit, a reservation, a dataset and a snapshot.
    // It runs a whole second, so its GPU time counts in fair-share (whole seconds) on any
    // machine: the waiting job's fair-share factor is then 0.5, never 1.0 on a fast run.
    let done = pool.submit(&["--gpus", "1", "-J", "done", "--wrap", "sleep 1"]);
    pool.wait_done(done, Duration::from_secs(20));
    let running = pool.submit(&["--gpus", "1", "-J", "long", "--wrap", "sleep 300"]);
    pool.wait_for(running, Duration::from_secs(20), |j| {
        s(j, "state") == "RUNNING"
    });
    let waiting = pool.submit(&["--gpus", "2", "-J", "big", "--wrap", "true"]);
    pool.wait_for(waiting, Duration::from_secs(20), |j| {
        s(j, "reason") == "Resources"
    });
    // The scheduler has counted the finished job's GPU time (the listings below show it).
    let end = std::time::Instant::now() + Duration::from_secs(20);
    while !pool
        .ok(&["why", &waiting.to_string(), "--json"])
        .contains("\"fairshare\": 0.5")
    {
        assert!(
            std::time::Instant::now() < end,
            "fair-share never counted job {done}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    pool.ok(&[
        "account",
        "add",
        "vision",
        "--description",
        "the vision group",
    ]);
    pool.ok(&["account", "add-user", "vision", "root"]);
    pool.ok(&["qos", "set", "vision", "GrpTRES=gres/gpu=2"]);
    pool.ok(&[
        "reservation",
        "create",
        "demo",
        "--start",
        "now+30days",
        "--duration",
        "2:00:00",
        "--gpus",
        "1",
        "--users",
        "root",
    ]);
    let data = pool.dir.join("shared/datasets/imagenet");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("train.bin"), vec![7u8; 4096]).unwrap();
    let data = data.display().to_string();
    pool.ok(&["dataset", "add", "imagenet", &data]);
    let home = pool.dir.join("shared/home/root");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("notes.txt"), "n").unwrap();
    pool.ok(&["snapshot", "create", "--source", "home"]);

    let why = waiting.to_string();
    let show = done.to_string();
    let listings: Vec<(&str, Vec<&str>)> = vec![
        ("queue", vec!["queue"]),
        ("history", vec!["history"]),
        ("show", vec!["show", &show]),
        ("why", vec!["why", &why]),
        ("nodes", vec!["nodes"]),
        ("partitions", vec!["partition", "list"]),
        ("accounts", vec!["account", "list"]),
        ("qos", vec!["qos", "list"]),
        ("reservations", vec!["reservation", "list"]),
        ("credits", vec!["credits"]),
        ("usage", vec!["usage"]),
        ("datasets", vec!["dataset", "list"]),
        ("envs", vec!["env", "list"]),
        ("quota", vec!["quota"]),
        ("snapshots", vec!["snapshot", "list"]),
    ];
    for (name, args) in listings {
        let table = pool.ok(&args);
        let mut json_args = args.clone();
        json_args.push("--json");
        let json = pool.ok(&json_args);
        let parsed: Result<serde_json::Value, _> = serde_json::from_str(&json);
        assert!(parsed.is_ok(), "labpool {args:?} --json: {json}");
        let line = args.join(" ");
        let shown = format!("$ labpool {line}\n{table}\n$ labpool {line} --json\n{json}");
        assert_listed(&format!("listing_{name}"), &pool.dir, &shown);
    }
    let sock = pool.dir.join("labpool.sock");
    let mut api = String::new();
    for path in [
        format!("/v1/jobs/{done}"),
        format!("/v1/jobs/{waiting}/why"),
        "/v1/jobs".to_string(),
        "/v1/history".to_string(),
        "/v1/nodes".to_string(),
        "/v1/partitions".to_string(),
        "/v1/accounts".to_string(),
        "/v1/credits".to_string(),
    ] {
        let (status, answer) = get_raw(&sock, &path);
        assert_eq!(status, 200, "GET {path}: {answer}");
        let answer = serde_json::to_string_pretty(&answer).unwrap();
        api.push_str(&format!("GET {path}\n{answer}\n\n"));
    }
    assert_listed("api_answers", &pool.dir, &api);
}
