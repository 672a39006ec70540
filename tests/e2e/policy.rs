//! Scheduling policy through the real binary: accounts and QOS limits, credits and tiers, the
//! emergency lane, dependencies, arrays, `why`, and the simulator command.

use crate::pool::{
    Pool, ensure_user, fails_stderr as fails, has, have_root, read_output, s, stdout_of,
};
use serde_json::Value;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

pub fn ms(v: &Value, key: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(s(v, key))
        .unwrap_or_else(|e| panic!("{key} of {v:#}: {e}"))
        .timestamp_millis()
}

#[test]
fn a_user_at_the_per_user_gpu_cap_waits_then_runs() {
    let mut pool = Pool::new("4:t4");
    pool.start();
    // Limits hold for admins' own jobs too.
    has(
        &pool.ok(&["qos", "set", "--user", "root", "MaxTRESPerUser=gres/gpu=1"]),
        &["user root: MaxTRESPerUser=gres/gpu=1"],
    );
    let first = pool.submit(&["--gpus", "1", "--wrap", "sleep 1"]);
    let second = pool.submit(&["--gpus", "1", "--wrap", "true"]);
    let waiting = pool.wait_for(second, T, |j| s(j, "reason") == "QOSMaxGRESPerUser");
    assert!(
        s(&waiting, "reason_detail").contains("root holds 1 GPUs and this job asks for 1"),
        "{waiting:#}"
    );
    let why = pool.ok(&["why", &second.to_string()]);
    has(
        &why,
        &[
            "QOSMaxGRESPerUser",
            "stopped at: limits",
            "tier: in-credit",
            "limits: MaxTRESPerUser=gres/gpu=1",
        ],
    );
    let (a, b) = (pool.wait_done(first, T), pool.wait_done(second, T));
    assert_eq!(s(&b, "state"), "COMPLETED");
    assert!(
        ms(&b, "start_time") >= ms(&a, "end_time"),
        "the second started only once the first ended"
    );
}

#[test]
fn accounts_limits_and_partitions_survive_a_restart() {
    let mut pool = Pool::new("2:t4");
    pool.start();
    // `high` is for the deadline account: refused until root is in it.
    let err = fails(&pool, &["submit", "-p", "high", "--wrap", "true"]);
    has(
        &err,
        &[
            "partition high is only for accounts deadline",
            "labpool partition list",
        ],
    );
    pool.ok(&[
        "account",
        "add",
        "deadline",
        "--description",
        "paper deadlines",
    ]);
    pool.ok(&["account", "add", "vision"]);
    pool.ok(&["account", "add-user", "deadline", "root"]);
    pool.ok(&["account", "add-user", "vision", "root"]);
    pool.ok(&["qos", "set", "vision", "GrpTRES=gres/gpu=1"]);
    pool.kill9();
    pool.start();
    let list: Value = serde_json::from_str(&pool.ok(&["account", "list", "--json"])).unwrap();
    assert_eq!(list["accounts"][0]["name"], "deadline");
    assert_eq!(list["accounts"][0]["description"], "paper deadlines");
    assert_eq!(list["accounts"][1]["limits"][0], "GrpTRES=gres/gpu=1");
    let high = pool.submit(&["-p", "high", "--wrap", "echo $SLURM_JOB_ACCOUNT"]);
    assert_eq!(s(&pool.wait_done(high, T), "state"), "COMPLETED");
    assert_eq!(
        read_output(&pool.work.join(format!("labpool-{high}.out"))).trim(),
        "deadline"
    );
    // Two one-GPU jobs under vision: GrpTRES=1 lets one run at a time.
    let a = pool.submit(&["-A", "vision", "--gpus", "1", "--wrap", "sleep 1"]);
    let b = pool.submit(&["-A", "vision", "--gpus", "1", "--wrap", "true"]);
    pool.wait_for(b, T, |j| s(j, "reason") == "AssocGrpGRES");
    assert!(ms(&pool.wait_done(b, T), "start_time") >= ms(&pool.wait_done(a, T), "end_time"));
    let err = fails(&pool, &["submit", "-A", "nope", "--wrap", "true"]);
    has(
        &err,
        &["unknown account 'nope'; accounts here: deadline, vision"],
    );
    assert_eq!(pool.history().len(), 3, "refused submits changed nothing");
}

#[test]
fn an_overdrawn_user_runs_only_on_gpus_nobody_in_credit_wants() {
    if !have_root("an_overdrawn_user_runs_only_on_gpus_nobody_in_credit_wants") {
        return;
    }
    let (alice, gid) = ensure_user("lp-alice");
    let mut pool = Pool::new("1:t4").for_users();
    pool.edit_config(|t| t.replace("monthly_grant = 1000", "monthly_grant = 0"));
    pool.start();
    pool.ok(&["credits", "grant", "lp-alice", "100", "--note", "thesis"]);
    let blocker = pool.submit(&["--gpus", "1", "--wrap", "sleep 1"]);
    pool.wait_for(blocker, T, |j| s(j, "state") == "RUNNING");
    // Root (no credit) queues first; alice (in credit) after. Alice goes first.
    let overdrawn = pool.submit(&["--gpus", "1", "--wrap", "true"]);
    let fresh = id(&pool.cli_as(
        alice,
        gid,
        &["submit", "--parsable", "--gpus", "1", "--wrap", "true"],
    ));
    let why = pool.ok(&["why", &overdrawn.to_string()]);
    has(&why, &["tier: overdrawn"]);
    let (o, f) = (pool.wait_done(overdrawn, T), pool.wait_done(fresh, T));
    assert!(
        ms(&f, "start_time") < ms(&o, "start_time"),
        "the user in credit ran first"
    );
    assert_eq!(
        s(&o, "state"),
        "COMPLETED",
        "the overdrawn job still ran, on the idle GPU"
    );
    let credits = pool.ok(&["credits"]);
    has(
        &credits,
        &["overdrawn: your jobs run only on GPUs nobody in credit wants, and are preempted"],
    );
    let alice_credits: Value =
        serde_json::from_str(&pool.ok(&["credits", "--user", "lp-alice", "--json"])).unwrap();
    assert_eq!(alice_credits["granted"], 100.0);
    assert_eq!(
        alice_credits["entries"][0]["note"],
        "granted by root: thesis"
    );
}

fn id(out: &std::process::Output) -> u64 {
    stdout_of(out).trim().parse().unwrap()
}

#[test]
fn jobs_are_charged_gpu_hours_times_the_type_weight() {
    let mut pool = Pool::new("2:t4");
    pool.edit_config(|t| {
        t.replace(
            "# gpu_weights = { a100 = 2.0, rtx4090 = 1.0, t4 = 0.5 }",
            "gpu_weights = { t4 = 2.0 }",
        )
    });
    pool.start();
    let job = pool.submit(&["--gpus", "2", "--wrap", "sleep 1"]);
    let j = pool.wait_done(job, T);
    // Charged on whole seconds held, as Slurm accounts.
    let held_s = ((ms(&j, "end_time") - ms(&j, "start_time")) / 1000) as f64;
    let c: Value = serde_json::from_str(&pool.ok(&["credits", "--json"])).unwrap();
    let charge = c["entries"][0]["amount"].as_f64().unwrap();
    assert_eq!(c["entries"][0]["kind"], "charge");
    assert_eq!(c["entries"][0]["job"], job);
    assert!(
        (charge - 2.0 * held_s / 3600.0 * 2.0).abs() < 1e-6,
        "charge {charge} for {held_s} s"
    );
    assert!((c["balance"].as_f64().unwrap() - (1000.0 - charge)).abs() < 1e-9);
    assert_eq!(c["tokens_left"], 2);
}

#[test]
fn an_emergency_job_jumps_the_queue_and_a_third_token_is_refused() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    let blocker = pool.submit(&["--gpus", "1", "--wrap", "sleep 1"]);
    pool.wait_for(blocker, T, |j| s(j, "state") == "RUNNING");
    let normal = pool.submit(&["--gpus", "1", "--wrap", "true"]);
    let urgent = pool.submit(&[
        "--gpus",
        "1",
        "--emergency",
        "--time",
        "10:00",
        "--wrap",
        "true",
    ]);
    let (n, u) = (pool.wait_done(normal, T), pool.wait_done(urgent, T));
    assert!(
        ms(&u, "start_time") < ms(&n, "start_time"),
        "the emergency job ran first"
    );
    assert_eq!(pool.job(urgent)["emergency"], true);
    // Too big for the lane, refused before a token is spent.
    has(
        &fails(
            &pool,
            &[
                "submit",
                "--gpus",
                "1",
                "--emergency",
                "--time",
                "3-00:00:00",
                "--wrap",
                "true",
            ],
        ),
        &["emergency jobs may ask for at most 2 GPUs and 1-00:00:00"],
    );
    pool.submit(&["--emergency", "--time", "1:00", "--wrap", "true"]);
    let err = fails(
        &pool,
        &["submit", "--emergency", "--time", "1:00", "--wrap", "true"],
    );
    has(
        &err,
        &[
            "root has used all 2 emergency tokens of this month; they come back on",
            "hint: submit it without --emergency",
        ],
    );
    let c: Value = serde_json::from_str(&pool.ok(&["credits", "--json"])).unwrap();
    assert_eq!(c["tokens_left"], 0);
    let tokens = c["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "emergency_token")
        .count();
    assert_eq!(tokens, 2);
}

#[test]
fn dependencies_wait_for_their_jobs() {
    let mut pool = Pool::new("2:t4");
    pool.start();
    let first = pool.submit(&["--wrap", "sleep 1; echo first > order"]);
    let after = pool.submit(&[
        "-d",
        &format!("afterok:{first}"),
        "--wrap",
        "echo after >> order",
    ]);
    let failing = pool.submit(&["--wrap", "exit 1"]);
    let never = pool.submit(&[
        "--dependency",
        &format!("afterok:{failing}"),
        "--wrap",
        "true",
    ]);
    let anyway = pool.submit(&[
        "--dependency",
        &format!("afterany:{failing}"),
        "--wrap",
        "true",
    ]);
    pool.wait_for(after, T, |j| s(j, "reason") == "Dependency");
    assert_eq!(s(&pool.wait_done(after, T), "state"), "COMPLETED");
    assert_eq!(read_output(&pool.work.join("order")), "first\nafter\n");
    assert_eq!(s(&pool.wait_done(anyway, T), "state"), "COMPLETED");
    let stuck = pool.wait_for(never, T, |j| s(j, "reason") == "DependencyNeverSatisfied");
    assert!(
        s(&stuck, "reason_detail").contains("cancel this job"),
        "{stuck:#}"
    );
    has(
        &fails(&pool, &["submit", "-d", "afterok:999", "--wrap", "true"]),
        &["there is no job 999"],
    );
    has(
        &fails(&pool, &["submit", "-d", "after:1", "--wrap", "true"]),
        &["invalid --dependency 'after:1'"],
    );
    pool.ok(&["cancel", &never.to_string()]);
    // afterok on an array waits for every task, as in Slurm.
    let array: u64 = pool
        .ok(&[
            "submit",
            "--parsable",
            "--array=0-1",
            "--wrap",
            "sleep 0.$((SLURM_ARRAY_TASK_ID * 8 + 1))",
        ])
        .trim()
        .parse()
        .unwrap();
    let whole = pool.submit(&["-d", &format!("afterok:{array}"), "--wrap", "true"]);
    let last_end = (0..2)
        .map(|t| ms(&pool.wait_done(array + t, T), "end_time"))
        .max()
        .unwrap();
    assert_eq!(
        s(&pool.job(whole), "dependency"),
        format!("afterok:{array},afterok:{}", array + 1)
    );
    let w = pool.wait_done(whole, T);
    assert!(
        ms(&w, "start_time") >= last_end,
        "it waited for the whole array: {w:#}\n{:#}\n{:#}",
        pool.job(array),
        pool.job(array + 1)
    );
}

#[test]
fn arrays_run_their_tasks_within_the_throttle() {
    let mut pool = Pool::new("4:t4");
    pool.start();
    pool.script(
        "task.sh",
        "#!/bin/sh\n#SBATCH --array=0-5%2 --gpus 1\n#SBATCH -o out-%A_%a.txt\nstart=$(date +%s%N); sleep 0.3\necho \"$SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT $start $(date +%s%N)\"\n",
    );
    let out = stdout_of(&pool.cli(&["submit", "task.sh"]));
    let array: u64 = out.split_whitespace().nth(3).unwrap().parse().unwrap();
    has(&out, &[&format!("Submitted array job {array} (6 tasks")]);
    let queue = pool.ok(&["queue"]);
    has(&queue, &[&format!("{array}_5")]);
    let mut spans = Vec::new();
    for task in 0..6u64 {
        let job = pool.wait_done(array + task, T);
        assert_eq!(s(&job, "state"), "COMPLETED");
        assert_eq!(
            (job["array_id"].as_u64(), job["array_task"].as_u64()),
            (Some(array), Some(task))
        );
        let line = read_output(&pool.work.join(format!("out-{array}_{task}.txt")));
        let f: Vec<u128> = line
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!((f[0], f[1]), (task as u128, 6));
        spans.push((f[2], f[3]));
    }
    for (start, _) in &spans {
        let running = spans
            .iter()
            .filter(|(s, e)| s <= start && start < e)
            .count();
        assert!(
            running <= 2,
            "{running} tasks ran at once; the throttle is 2"
        );
    }
    // Cancel one task, then the rest of an array.
    let second = stdout_of(&pool.cli(&[
        "submit",
        "--parsable",
        "--array=0-3",
        "--gpus",
        "4",
        "--wrap",
        "sleep 30",
    ]));
    let a: u64 = second.trim().parse().unwrap();
    has(
        &pool.ok(&["cancel", &format!("{a}_3")]),
        &[&format!("job {} cancelled", a + 3)],
    );
    has(
        &pool.ok(&["cancel", &a.to_string()]),
        &[&format!("array {a}:")],
    );
    for t in 0..4 {
        assert_eq!(s(&pool.wait_done(a + t, T), "state"), "CANCELLED");
    }
    has(
        &fails(&pool, &["submit", "--array=9-1", "--wrap", "true"]),
        &["invalid --array '9-1'"],
    );
}

#[test]
fn why_shows_tier_factors_and_stage_counts() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    let holder = pool.submit(&["--gpus", "1", "--wrap", "sleep 20"]);
    let waiter = pool.submit(&["--gpus", "1", "--wrap", "true"]);
    pool.wait_for(waiter, T, |j| s(j, "reason") == "Resources");
    let why = pool.ok(&["why", &waiter.to_string()]);
    has(
        &why,
        &[
            "waits: Resources",
            "stopped at: placement (position 1",
            "tier: in-credit",
            "fair-share",
            "STAGE",
            "gpus-free",
            "reserved:",
            "then scored by: dataset-locality, binpack",
        ],
    );
    let json: Value =
        serde_json::from_str(&pool.ok(&["why", &waiter.to_string(), "--json"])).unwrap();
    assert_eq!(json["note"]["factors"]["tier"], "in_credit");
    assert_eq!(json["note"]["rejections"]["by_stage"][0][0], "gpus-free");
    has(
        &pool.ok(&["why", &holder.to_string()]),
        &["RUNNING", "runs on"],
    );
    pool.ok(&["cancel", &holder.to_string(), &waiter.to_string()]);
}

#[test]
fn the_simulator_compares_policies_deterministically() {
    // The first 150 jobs of the shipped trace: the whole trace takes a minute in a debug build.
    let full = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/bench/traces/philly-gavel-a.csv"
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let excerpt = dir.path().join("trace.csv");
    std::fs::write(
        &excerpt,
        full.lines().take(151).collect::<Vec<_>>().join("\n"),
    )
    .unwrap();
    let trace = excerpt.to_str().unwrap();
    let datasets = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/traces/datasets.csv");
    let run = || {
        let out = std::process::Command::new(crate::pool::bin())
            .args([
                "sim",
                "--trace",
                trace,
                "--datasets",
                datasets,
                "--nodes",
                "4x8:v100",
                "--seed",
                "7",
                "--json",
            ])
            .output()
            .unwrap();
        stdout_of(&out)
    };
    let first = run();
    assert_eq!(
        first,
        run(),
        "the same seed and input give byte-identical output"
    );
    let reports: Vec<Value> = first
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = reports
        .iter()
        .map(|r| r["policy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fifo", "locality", "locality+prefetch"]);
    for r in &reports {
        for key in [
            "makespan_s",
            "mean_wait_s",
            "p95_wait_s",
            "mean_jct_s",
            "gpu_util",
            "shared_bytes",
            "cache_hit_rate",
            "data_wait_gpu_s",
        ] {
            assert!(r[key].is_number(), "{key} missing in {r}");
        }
        assert_eq!(
            r["jobs"].as_u64().unwrap() + r["rejected"].as_u64().unwrap(),
            150
        );
        assert_eq!(r["unfinished"], 0);
    }
    let table = stdout_of(
        &std::process::Command::new(crate::pool::bin())
            .args([
                "sim",
                "--trace",
                trace,
                "--datasets",
                datasets,
                "--policy",
                "fifo",
            ])
            .output()
            .unwrap(),
    );
    has(
        &table,
        &[
            "bytes read from shared storage",
            "GPU time waiting for data",
        ],
    );
    // `labpool` replays the policy of the config given, through the daemon's lifecycle core.
    let config = dir.path().join("pool/labpool.toml");
    let init = std::process::Command::new(crate::pool::bin())
        .args(["init", "--virtual-gpus", "2:rtx4090", "--dir"])
        .arg(dir.path().join("pool"))
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let daemon = || {
        stdout_of(
            &std::process::Command::new(crate::pool::bin())
                .args(["sim", "--trace", trace, "--datasets", datasets])
                .args(["--nodes", "4x8:v100", "--policy", "labpool", "--json"])
                .arg("--config")
                .arg(&config)
                .output()
                .unwrap(),
        )
    };
    let first = daemon();
    assert_eq!(
        first,
        daemon(),
        "the same seed and config give identical bytes"
    );
    let report: Value = serde_json::from_str(first.trim()).unwrap();
    assert_eq!(report["policy"], "labpool");
    assert_eq!(report["unfinished"], 0);
    let bad = std::process::Command::new(crate::pool::bin())
        .args([
            "sim",
            "--trace",
            trace,
            "--datasets",
            datasets,
            "--policy",
            "best",
        ])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    has(
        &String::from_utf8_lossy(&bad.stderr),
        &["unknown policy 'best'; policies: fifo, locality, locality+prefetch"],
    );
}
