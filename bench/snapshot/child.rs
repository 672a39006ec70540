//! labpool's side of a measurement: this binary re-run as a child process, doing one
//! operation (init, backup, restore one file, restore all, check) on a repository.

use labpool_snapshots::restore::{open_dir_nofollow, restore_node};
use labpool_snapshots::{BackupOptions, Progress, Repository, RestoreOptions};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Set to the operation, it makes this binary labpool's side of a measurement.
pub const CHILD: &str = "BENCH_SNAPSHOT_CHILD";

/// labpool's side of a measurement, in its own process: `BENCH_SNAPSHOT_CHILD=op exe REPO ...`.
pub fn child(op: &str) {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let repo_path = &args[0];
    let t0 = Instant::now();
    let progress = Progress::default();
    if op == "init" {
        Repository::init(repo_path).unwrap();
        return;
    }
    let repo = Repository::open(repo_path).unwrap();
    let restore = |node: &labpool_snapshots::tree::Node, target: &Path| {
        let fd = open_dir_nofollow(target).unwrap();
        let opts = RestoreOptions {
            set_owner: true,
            ..Default::default()
        };
        let r = restore_node(&repo, node, &fd, target, &opts, &progress).unwrap();
        assert!(r.failed.is_empty(), "restore failed: {:?}", r.failed);
        println!(
            "restored {} files, {} bytes in {:.3} s in process",
            r.files,
            r.bytes,
            t0.elapsed().as_secs_f64()
        );
    };
    match op {
        "backup" => {
            let opts = BackupOptions {
                source: "datasets".into(),
                path: args[1].clone(),
                excludes: vec![],
                one_file_system: true,
                host: "bench".into(),
                time: chrono::Utc::now(),
            };
            let r = labpool_snapshots::create(&repo, &opts, &progress).unwrap();
            assert!(r.warnings.is_empty(), "backup warnings: {:?}", r.warnings);
            println!(
                "snapshot {}: {} files, {} bytes, added {} bytes",
                r.snapshot.id, r.snapshot.files, r.snapshot.bytes, r.snapshot.added_bytes
            );
        }
        "restore-one" => {
            let snap = repo.select("latest").unwrap();
            let node = labpool_snapshots::browse::lookup(&repo, &snap, &args[1], None)
                .unwrap()
                .expect("the file is in the latest snapshot");
            restore(&node, &args[2]);
        }
        "restore-all" => {
            let snap = repo.select("latest").unwrap();
            restore(&snap.root, &args[1]);
        }
        "check" => {
            let r = labpool_snapshots::check::check(&repo, true, &progress).unwrap();
            assert!(r.ok(), "check found problems: {:?}", r.errors);
            println!(
                "checked {} packs, {} blobs, {} trees",
                r.packs, r.blobs_read, r.trees
            );
        }
        other => panic!("unknown child operation {other}"),
    }
}
