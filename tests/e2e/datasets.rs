//! Datasets end to end: registration, staging into the node cache before a job starts, crash
//! recovery mid-stage, rescans that copy only what changed, eviction under pins, verify, and
//! bad input. Real files, a real controller, real jobs.

use crate::pool::{Pool, bytes, fails_stderr, has, read_output, s};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// The config line `init` writes for stage-in, and the one that takes GPUs at once.
pub const STAGE_IN_DEFAULT: &str = "stage_in_wait = \"7d\"";
pub const STAGE_IN_OFF: &str = "stage_in_wait = \"0s\"";

/// Makes `root/NAME` with `files` files of `size` bytes (some in a subdirectory) and a link;
/// returns its path.
fn make_dataset(pool: &Pool, name: &str, files: usize, size: usize) -> PathBuf {
    let dir = pool.dir.join("shared/datasets").join(name);
    std::fs::create_dir_all(dir.join("train")).unwrap();
    for i in 0..files {
        let sub = if i % 2 == 0 { "train" } else { "" };
        let p = dir.join(sub).join(format!("part-{i:03}.bin"));
        std::fs::write(&p, bytes(i as u64 + name.len() as u64 * 1000, size)).unwrap();
        // Group- and world-writable, as a careless copy leaves it: registration takes that off.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    std::os::unix::fs::symlink("train/part-000.bin", dir.join("first")).unwrap();
    dir
}

/// Makes a dataset (see [`make_dataset`]) and registers it.
pub fn add_dataset(pool: &Pool, name: &str, files: usize, size: usize) -> PathBuf {
    let dir = make_dataset(pool, name, files, size);
    pool.ok(&["dataset", "add", name, dir.to_str().unwrap()]);
    dir
}

/// A running pool with 2 GPUs whose cache (3 MB) has room for one of its two 2 MB datasets,
/// alpha and beta, at a time.
fn small_cache_with_alpha_and_beta() -> (Pool, PathBuf, PathBuf) {
    let mut pool = Pool::new("2:t4");
    pool.edit_config(|t| t.replace("# capacity = \"500G\"", "capacity = \"3M\""));
    pool.start();
    let a = add_dataset(&pool, "alpha", 4, 500_000);
    let b = add_dataset(&pool, "beta", 4, 500_000);
    (pool, a, b)
}

pub fn json(pool: &Pool, args: &[&str]) -> Value {
    serde_json::from_str(&pool.ok(args)).unwrap()
}

/// The datasets of the versions the first node's cache holds, from `cache status --json`.
fn cached_names(status: &Value) -> Vec<&str> {
    status[0]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect()
}

/// The job's events of one kind, as their detail texts.
pub fn events(job: &Value, kind: &str) -> Vec<String> {
    job["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == kind)
        .map(|e| s(e, "detail").to_string())
        .collect()
}

/// Every file under `dir` whose name ends in `.partial`.
fn partials(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".partial") {
                out.push(p);
            }
        }
    }
    out
}

/// A script that checks its dataset against the source and says where it read it.
pub fn check_script(var: &str, source: &Path) -> String {
    format!(
        "test \"$LABPOOL_DATASETS\" && test -d \"$LABPOOL_DATASETS/{name}\" && diff -r \"${var}\" {src} && echo \"OK ${var}\"",
        name = var.trim_start_matches("LABPOOL_DATASET_").to_lowercase(),
        src = source.display()
    )
}

#[test]
fn jobs_read_a_verified_local_copy_and_concurrent_jobs_stage_it_once() {
    let mut pool = Pool::new("4:t4");
    // Slow enough (about 0.6 s) that the three jobs below are placed while it stages; placed
    // at once, each on its GPU (no stage-in; `stage_in.rs` has the held path).
    pool.edit_config(|t| {
        t.replace("# bandwidth = \"200M\"", "bandwidth = \"2M\"")
            .replace(STAGE_IN_DEFAULT, STAGE_IN_OFF)
    });
    pool.start();
    let src = make_dataset(&pool, "imagenet", 20, 64 * 1024);
    let added = json(
        &pool,
        &[
            "dataset",
            "add",
            "imagenet",
            src.to_str().unwrap(),
            "--description",
            "tiny",
            "--json",
        ],
    );
    assert_eq!(added["files"], 20);
    assert_eq!(added["bytes"], 20 * 64 * 1024);
    assert_eq!(added["env_var"], "LABPOOL_DATASET_IMAGENET");
    // The source is read-only for members now; ownership is unchanged.
    let mode = std::fs::metadata(src.join("train/part-000.bin"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o022, 0, "group/other write bits must go: {mode:o}");
    let listed = json(&pool, &["dataset", "list", "--json"]);
    assert_eq!(listed[0]["name"], "imagenet");

    let script = check_script("LABPOOL_DATASET_IMAGENET", &src);
    let ids: Vec<u64> = (0..3)
        .map(|_| pool.submit(&["--gpus", "1", "--dataset", "imagenet", "--wrap", &script]))
        .collect();
    let mut copied = Vec::new();
    for id in &ids {
        let j = pool.wait_done(*id, T);
        assert_eq!(s(&j, "state"), "COMPLETED", "{j:#}");
        let out = read_output(&pool.work.join(format!("labpool-{id}.out")));
        has(&out, &["OK /"]);
        // It read the node cache, not the source.
        let cache = pool.dir.join("cache/imagenet");
        assert!(out.contains(cache.to_str().unwrap()), "{out}");
        assert_eq!(events(&j, "staging").len(), 1, "{j:#}");
        copied.extend(events(&j, "staged"));
    }
    // All three waited in STAGING together; one stage copied the files, and the others
    // found them staged.
    assert_eq!(copied.len(), 3, "{copied:#?}");
    let copies: Vec<&String> = copied
        .iter()
        .filter(|e| e.contains("copied 20 files"))
        .collect();
    assert_eq!(copies.len(), 1, "{copied:#?}");
    assert_eq!(
        copied
            .iter()
            .filter(|e| e.contains("copied 0 files"))
            .count(),
        2,
        "{copied:#?}"
    );
    let status = json(&pool, &["cache", "status", "--json"]);
    let versions = status[0]["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1, "{status:#}");
    assert_eq!(versions[0]["complete"], true);
    assert_eq!(versions[0]["uses"], 3);
    assert!(partials(&pool.dir.join("cache")).is_empty());

    // A fourth job finds it staged: no STAGING step at all, and it counts as a hit.
    let id = pool.submit(&["--dataset", "imagenet", "--wrap", &script]);
    let j = pool.wait_done(id, T);
    assert_eq!(s(&j, "state"), "COMPLETED");
    assert!(events(&j, "staging").is_empty(), "{j:#}");
    let t0 = std::time::Instant::now();
    loop {
        let status = json(&pool, &["cache", "status", "--json"]);
        if status[0]["versions"][0]["hits"] == 1 {
            break;
        }
        assert!(t0.elapsed() < T, "{status:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_controller_killed_mid_stage_resumes_and_nothing_half_copied_is_visible() {
    let mut pool = Pool::new("1:t4");
    // 6 MiB at 2 MB/s: about three seconds of staging to kill it in, the job on its GPU.
    pool.edit_config(|t| {
        t.replace("# bandwidth = \"200M\"", "bandwidth = \"2M\"")
            .replace(STAGE_IN_DEFAULT, STAGE_IN_OFF)
    });
    pool.start();
    let src = add_dataset(&pool, "shards", 12, 512 * 1024);
    let script = check_script("LABPOOL_DATASET_SHARDS", &src);
    let id = pool.submit(&["--gpus", "1", "--dataset", "shards", "--wrap", &script]);
    let j = pool.wait_for(id, T, |j| {
        s(j, "state") == "STAGING"
            && s(j, "reason_detail")
                .split_once("%")
                .and_then(|(a, _)| a.rsplit(' ').next()?.parse::<u32>().ok())
                .is_some_and(|pct| pct >= 20)
    });
    assert_eq!(s(&j, "reason"), "Staging");
    has(s(&j, "reason_detail"), &["shards@", "of 12 files", "/s"]);
    // While staging, the GPU is held but the job's clock has not started.
    assert!(j["start_time"].is_null(), "{j:#}");
    let table = pool.ok(&["queue"]);
    has(&table, &["STAGING", "[0]", "shards@"]);
    let why = pool.ok(&["why", &id.to_string()]);
    has(
        &why,
        &["its clock starts when its datasets are staged", "shards@"],
    );
    let version = json(&pool, &["dataset", "show", "shards", "--json"])["current"]
        .as_str()
        .unwrap()
        .to_string();
    let cache = pool.dir.join("cache/shards");
    // Copies become durable in batches (synced, renamed, journaled): wait for the first.
    let journal = cache.join(format!("{version}.journal"));
    labpool_testkit::wait::wait_until_every(
        Duration::from_millis(20),
        T,
        || std::fs::metadata(&journal).map_or(0, |m| m.len()) != 0,
        || "no copy was journaled",
    );
    pool.kill9();
    assert!(
        !cache.join(format!("{version}.complete")).exists(),
        "killed mid-stage, the version must not be marked complete"
    );
    pool.start();
    let j = pool.wait_done(id, T);
    assert_eq!(s(&j, "state"), "COMPLETED", "{j:#}");
    let staged = events(&j, "staged");
    assert_eq!(staged.len(), 1, "{j:#}");
    let resumed: u64 = staged[0]
        .rsplit("resumed ")
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        resumed > 0,
        "the restart must resume, not start over: {staged:?}"
    );
    has(
        &read_output(&pool.work.join(format!("labpool-{id}.out"))),
        &["OK /"],
    );
    assert!(partials(&cache).is_empty(), "{:?}", partials(&cache));
    let verified = json(&pool, &["cache", "verify", "--json"]);
    assert_eq!(verified[0]["files"], 12, "{verified:#}");
    assert_eq!(verified[0]["mismatched"].as_array().unwrap().len(), 0);
}

#[test]
fn a_rescan_makes_a_version_that_copies_only_changed_files_and_running_jobs_keep_theirs() {
    let mut pool = Pool::new("2:t4");
    pool.start();
    let src = add_dataset(&pool, "coco", 20, 100_000);
    // Warm-up with a progress bar, then a job that keeps reading version 1.
    pool.ok(&["cache", "stage", "coco"]);
    let old = src.join("train/part-000.bin");
    let before = std::fs::read(&old).unwrap();
    let id1 = pool.submit(&[
        "--gpus",
        "1",
        "--dataset",
        "coco",
        "--wrap",
        "sleep 3; cmp \"$LABPOOL_DATASET_COCO/train/part-000.bin\" v1-copy && echo KEPT",
    ]);
    std::fs::write(pool.work.join("v1-copy"), &before).unwrap();
    pool.wait_for(id1, T, |j| s(j, "state") == "RUNNING");

    // One file changes size and content, one is new: 2 of 21 files, 1,500 + 7,000 bytes.
    std::fs::write(&old, bytes(77, 1_500)).unwrap();
    std::fs::write(src.join("extra.bin"), bytes(78, 7_000)).unwrap();
    let r = json(&pool, &["dataset", "rescan", "coco", "--json"]);
    assert_eq!(r["new_version"], true, "{r:#}");
    assert_eq!(r["changed_bytes"], 8_500, "{r:#}");
    let again = json(&pool, &["dataset", "rescan", "coco", "--json"]);
    assert_eq!(again["new_version"], false, "{again:#}");
    let versions = json(&pool, &["dataset", "versions", "coco", "--json"]);
    assert_eq!(versions.as_array().unwrap().len(), 2);

    let script = check_script("LABPOOL_DATASET_COCO", &src);
    let id2 = pool.submit(&["--gpus", "1", "--dataset", "coco", "--wrap", &script]);
    let j2 = pool.wait_done(id2, T);
    assert_eq!(s(&j2, "state"), "COMPLETED", "{j2:#}");
    let staged = events(&j2, "staged");
    assert_eq!(staged.len(), 1, "{j2:#}");
    has(&staged[0], &["copied 2 files", "linked 19 unchanged"]);
    // Bytes written for the new version are the changed bytes, not the dataset's size.
    has(&staged[0], &["copied 2 files (8.3K)"]);

    let j1 = pool.wait_done(id1, T);
    assert_eq!(s(&j1, "state"), "COMPLETED", "{j1:#}");
    has(
        &read_output(&pool.work.join(format!("labpool-{id1}.out"))),
        &["KEPT"],
    );

    // No job reads the older versions now: the next version takes the closest one over, and
    // writes only the changed file.
    std::fs::write(src.join("extra.bin"), bytes(79, 7_001)).unwrap();
    let r = json(&pool, &["dataset", "rescan", "coco", "--json"]);
    assert_eq!(r["new_version"], true, "{r:#}");
    let id3 = pool.submit(&["--dataset", "coco", "--wrap", &script]);
    let j3 = pool.wait_done(id3, T);
    assert_eq!(s(&j3, "state"), "COMPLETED", "{j3:#}");
    has(
        &events(&j3, "staged")[0],
        &["copied 1 file (6.8K)", "linked 0", "reused 20 in place"],
    );
    let status = json(&pool, &["cache", "status", "--json"]);
    assert_eq!(
        status[0]["versions"].as_array().unwrap().len(),
        2,
        "{status:#}"
    );
}

#[test]
fn a_full_cache_makes_jobs_wait_and_never_evicts_a_pinned_version() {
    let (pool, _, b) = small_cache_with_alpha_and_beta();
    // Datasets that fit a cache alone but not together: refused at submit, not queued forever.
    let e = fails_stderr(
        &pool,
        &[
            "submit",
            "--dataset",
            "alpha",
            "--dataset",
            "beta",
            "--wrap",
            "true",
        ],
    );
    has(
        &e,
        &[
            "hold 3.8M",
            "largest node cache (3M)",
            "capacity under [cache]",
        ],
    );
    let ja = pool.submit(&[
        "--gpus",
        "1",
        "--dataset",
        "alpha",
        "--wrap",
        "sleep 4; ls \"$LABPOOL_DATASET_ALPHA/train\" | wc -l",
    ]);
    pool.wait_for(ja, T, |j| s(j, "state") == "RUNNING");
    let jb = pool.submit(&[
        "--gpus",
        "1",
        "--dataset",
        "beta",
        "--wrap",
        &check_script("LABPOOL_DATASET_BETA", &b),
    ]);
    // A GPU is free, but the cache is not: beta waits, and says why.
    let j = pool.wait_for(jb, T, |j| s(j, "reason") == "CacheFull");
    assert_eq!(s(&j, "state"), "PENDING", "{j:#}");
    let status = json(&pool, &["cache", "status", "--json"]);
    let alpha = &status[0]["versions"][0];
    assert_eq!(alpha["name"], "alpha");
    assert_eq!(alpha["pinned_by"][0], ja, "{status:#}");
    assert_eq!(
        s(&pool.job(ja), "state"),
        "RUNNING",
        "alpha was never evicted"
    );
    // When alpha's job ends, its version may go: beta stages and runs.
    let j = pool.wait_done(jb, T);
    assert_eq!(s(&j, "state"), "COMPLETED", "{j:#}");
    assert_eq!(s(&pool.wait_done(ja, T), "state"), "COMPLETED");
    let out = read_output(&pool.work.join(format!("labpool-{ja}.out")));
    assert_eq!(out.trim(), "2", "alpha's files stayed while its job ran");
    let status = json(&pool, &["cache", "status", "--json"]);
    assert_eq!(cached_names(&status), ["beta"], "{status:#}");
    assert!(status[0]["used_bytes"].as_u64().unwrap() <= 3_000_000);
}

#[test]
fn cache_verify_finds_a_corrupt_file_and_stages_it_again() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    let src = add_dataset(&pool, "mnist", 6, 10_000);
    pool.ok(&["cache", "stage", "mnist"]);
    let version = json(&pool, &["dataset", "show", "mnist", "--json"])["current"]
        .as_str()
        .unwrap()
        .to_string();
    let victim = pool
        .dir
        .join(format!("cache/mnist/{version}/train/part-002.bin"));
    // Same size, different bytes: only hashing can tell.
    std::fs::write(&victim, bytes(999, 10_000)).unwrap();
    let r = json(&pool, &["cache", "verify", "--json"]);
    assert_eq!(r[0]["mismatched"][0], "train/part-002.bin", "{r:#}");
    assert_eq!(r[0]["repaired"][0], "train/part-002.bin", "{r:#}");
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        std::fs::read(src.join("train/part-002.bin")).unwrap()
    );
    let r = json(&pool, &["cache", "verify", "--json"]);
    assert_eq!(r[0]["mismatched"].as_array().unwrap().len(), 0, "{r:#}");
}

#[test]
fn bad_dataset_input_gets_a_clear_error_and_leaves_the_cache_consistent() {
    let mut pool = Pool::new("1:t4");
    pool.edit_config(|t| t.replace("# bandwidth = \"200M\"", "bandwidth = \"1M\""));
    pool.start();
    let root = pool.dir.join("shared/datasets");
    // Unknown at submit, with the registered ones listed.
    let e = fails_stderr(&pool, &["submit", "--dataset", "nope", "--wrap", "true"]);
    has(
        &e,
        &["unknown dataset \"nope\"", "no datasets are registered"],
    );
    let src = add_dataset(&pool, "real", 4, 1000);
    let e = fails_stderr(&pool, &["submit", "--dataset", "nope", "--wrap", "true"]);
    has(
        &e,
        &["unknown dataset \"nope\"", "registered datasets: real"],
    );
    // A symlink to elsewhere, a path outside the root, a name taken, a bad name.
    std::os::unix::fs::symlink("/etc", root.join("etc-link")).unwrap();
    let e = fails_stderr(
        &pool,
        &[
            "dataset",
            "add",
            "x",
            root.join("etc-link").to_str().unwrap(),
        ],
    );
    has(&e, &["is a symlink", "/etc"]);
    let e = fails_stderr(&pool, &["dataset", "add", "x", "/usr/share"]);
    has(
        &e,
        &["is not under the datasets root", root.to_str().unwrap()],
    );
    let e = fails_stderr(&pool, &["dataset", "add", "real", src.to_str().unwrap()]);
    has(&e, &["registered already", "dataset rescan real"]);
    let e = fails_stderr(&pool, &["dataset", "add", "../up", src.to_str().unwrap()]);
    has(&e, &["invalid dataset name"]);
    let e = fails_stderr(&pool, &["dataset", "show", "x"]);
    has(&e, &["no dataset \"x\"", "registered datasets: real"]);
    let listed = json(&pool, &["dataset", "list", "--json"]);
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "nothing was added: {listed:#}"
    );

    // A source that vanishes while it is staged: the job fails with the reason and is not
    // charged; the half-staged version is never marked complete.
    let big = add_dataset(&pool, "fleeting", 8, 400_000);
    let id = pool.submit(&["--gpus", "1", "--dataset", "fleeting", "--wrap", "true"]);
    // Copied while it waits for its GPUs (a stage-in), or on them.
    pool.wait_for(id, T, |j| {
        s(j, "state") == "STAGING" || s(j, "reason") == "BurstBufferStageIn"
    });
    std::fs::remove_dir_all(&big).unwrap();
    let j = pool.wait_done(id, T);
    assert_eq!(s(&j, "state"), "FAILED", "{j:#}");
    has(s(&j, "reason_detail"), &["staging its datasets", "failed"]);
    let status = json(&pool, &["cache", "status", "--json"]);
    let v = status[0]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "fleeting")
        .cloned()
        .unwrap();
    assert_eq!(v["complete"], false, "{status:#}");
    let credits = pool.ok(&["credits", "--json"]);
    let credits: Value = serde_json::from_str(&credits).unwrap();
    assert_eq!(credits["charged"].as_f64(), Some(0.0), "{credits:#}");
    // A warm-up of it fails too, and says why and where.
    let e = fails_stderr(&pool, &["cache", "stage", "fleeting"]);
    has(
        &e,
        &[
            "staging fleeting@",
            "failed",
            "dataset fleeting",
            "dataset rescan fleeting",
        ],
    );
    // The cache still serves other datasets.
    let id = pool.submit(&[
        "--dataset",
        "real",
        "--wrap",
        &check_script("LABPOOL_DATASET_REAL", &src),
    ]);
    assert_eq!(s(&pool.wait_done(id, T), "state"), "COMPLETED");
}

#[test]
fn versions_that_share_files_are_removed_together_to_make_room() {
    let (pool, a, b) = small_cache_with_alpha_and_beta();
    // alpha v1 is read by a running job while v2 is staged: v2 hard-links its unchanged files.
    let j1 = pool.submit(&["--gpus", "1", "--dataset", "alpha", "--wrap", "sleep 3"]);
    pool.wait_for(j1, T, |j| s(j, "state") == "RUNNING");
    std::fs::write(a.join("train/part-000.bin"), bytes(5, 500_001)).unwrap();
    pool.ok(&["dataset", "rescan", "alpha"]);
    let j2 = pool.submit(&["--gpus", "1", "--dataset", "alpha", "--wrap", "true"]);
    let staged = events(&pool.wait_done(j2, T), "staged");
    has(&staged[0], &["copied 1 file", "linked 3 unchanged"]);
    assert_eq!(s(&pool.wait_done(j1, T), "state"), "COMPLETED");
    // Each alpha version alone holds only its one different file, but together they hold
    // 2.5 MB: beta (2 MB) fits once both go, and it does not wait forever.
    let jb = pool.submit(&[
        "--dataset",
        "beta",
        "--wrap",
        &check_script("LABPOOL_DATASET_BETA", &b),
    ]);
    let j = pool.wait_done(jb, T);
    assert_eq!(s(&j, "state"), "COMPLETED", "{j:#}");
    let status = json(&pool, &["cache", "status", "--json"]);
    assert_eq!(cached_names(&status), ["beta"], "{status:#}");
}
