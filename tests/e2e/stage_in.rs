//! Stage-in end to end: a job that could start on a node without its data stays PENDING, its
//! GPU not taken, while a real copy runs there, and says how far it is; then it takes its GPU
//! and runs on the local copy at once, with what was copied in its log and no STAGING step.

use crate::datasets::{add_dataset, check_script, events};
use crate::pool::{Pool, has, read_output, s};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

#[test]
fn a_job_waits_without_its_gpu_while_its_data_is_copied_then_runs_on_the_local_copy() {
    let mut pool = Pool::new("1:t4");
    // 6 MiB at 2 MB/s: about three seconds of copying to watch.
    pool.edit_config(|t| t.replace("# bandwidth = \"200M\"", "bandwidth = \"2M\""));
    pool.start();
    let src = add_dataset(&pool, "shards", 12, 512 * 1024);
    let script = check_script("LABPOOL_DATASET_SHARDS", &src);
    let id = pool.submit(&["--gpus", "1", "--dataset", "shards", "--wrap", &script]);
    let j = pool.wait_for(id, T, |j| {
        s(j, "reason") == "BurstBufferStageIn" && s(j, "reason_detail").contains('%')
    });
    // Pending, no GPU held, no clock started; the reason says how far the copy is, and where.
    assert_eq!(s(&j, "state"), "PENDING", "{j:#}");
    assert!(j["node"].is_null() && j["start_time"].is_null(), "{j:#}");
    has(
        s(&j, "reason_detail"),
        &["shards@", "of 12 files", "it takes its GPUs on"],
    );
    let nodes = pool.ok(&["nodes", "--json"]);
    let nodes: serde_json::Value = serde_json::from_str(&nodes).unwrap();
    assert_eq!(nodes[0]["gpus_free"], 1, "{nodes:#}");

    let j = pool.wait_done(id, T);
    assert_eq!(s(&j, "state"), "COMPLETED", "{j:#}");
    let out = read_output(&pool.work.join(format!("labpool-{id}.out")));
    has(&out, &["OK /"]);
    assert!(
        out.contains(pool.dir.join("cache/shards").to_str().unwrap()),
        "{out}"
    );
    // It never held its GPU while copying: no STAGING step; the copy is in its log.
    assert!(events(&j, "staging").is_empty(), "{j:#}");
    let staged = events(&j, "staged");
    assert_eq!(staged.len(), 1, "{j:#}");
    has(&staged[0], &["shards@", "copied 12 files"]);
}
