//! A dataset larger than every node's cache is streamed: the job runs against the shared source
//! (read-only), with a warning at submit and in `why`, and nothing of it is cached.

use crate::pool::{Pool, bytes, has, read_output, s, wait_until};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

#[test]
fn a_dataset_larger_than_every_cache_is_read_from_the_shared_source_with_a_warning() {
    let mut pool = Pool::new("1:t4");
    pool.edit_config(|t| t.replace("# capacity = \"500G\"", "capacity = \"1M\""));
    pool.start();
    let dir = pool.dir.join("shared/datasets/laion");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..3 {
        std::fs::write(dir.join(format!("shard-{i}.tar")), bytes(i, 600_000)).unwrap();
    }
    pool.ok(&["dataset", "add", "laion", dir.to_str().unwrap()]);
    // The agent reports its cache with its first inventory; wait for it, as a member would
    // see it in `cache status`.
    wait_until(
        T,
        || pool.ok(&["cache", "status", "--json"]).contains("capacity"),
        || "the node's cache never reported",
    );

    let out = pool.cli(&[
        "submit",
        "--parsable",
        "--gpus",
        "1",
        "--dataset",
        "laion",
        "--wrap",
        "echo \"$LABPOOL_DATASET_LAION\"; cat \"$LABPOOL_DATASET_LAION\"/shard-*.tar | wc -c; sleep 2",
    ]);
    assert!(out.status.success(), "{out:?}");
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let warning = String::from_utf8_lossy(&out.stderr);
    has(
        &warning,
        &[
            "warning: dataset laion (1.7M) is larger than every node's cache (the largest holds 1M)",
            "$LABPOOL_DATASET_LAION (read-only)",
        ],
    );
    pool.wait_for(id, T, |j| s(j, "state") == "RUNNING");
    let why = pool.ok(&["why", &id.to_string()]);
    has(
        &why,
        &["warning: dataset laion (1.7M) is larger than every node's cache"],
    );
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
    let printed = read_output(&pool.work.join(format!("labpool-{id}.out")));
    let mut lines = printed.lines();
    assert_eq!(lines.next(), Some(dir.to_str().unwrap()), "{printed}");
    assert_eq!(lines.next().map(str::trim), Some("1800000"), "{printed}");
    // Nothing of it was copied into the cache.
    assert!(
        !pool.ok(&["cache", "status", "--json"]).contains("laion"),
        "a streamed dataset is never cached"
    );
}
