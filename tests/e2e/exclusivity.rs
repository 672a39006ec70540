//! No GPU is ever held by two jobs at once: 12 one-GPU and 2 two-GPU jobs on 4 GPUs.

use crate::pool::{Pool, read_output, s};
use std::collections::BTreeMap;
use std::time::Duration;

#[test]
fn fourteen_jobs_on_four_gpus_never_share_one() {
    let mut pool = Pool::new("4:rtx4090");
    pool.start();
    pool.script(
        "record.sh",
        "#!/bin/sh\nstart=$(date +%s%N)\nsleep 0.4\nend=$(date +%s%N)\necho \"$CUDA_VISIBLE_DEVICES $start $end\" > span-$SLURM_JOB_ID\n",
    );
    let mut ids = Vec::new();
    for i in 0..14 {
        // The two-GPU jobs sit among the one-GPU ones.
        let gpus = if i == 3 || i == 9 { "2" } else { "1" };
        ids.push(pool.submit(&["--gpus", gpus, "record.sh"]));
    }
    let mut spans: BTreeMap<u32, Vec<(u128, u128, u64)>> = BTreeMap::new();
    for &id in &ids {
        let job = pool.wait_done(id, Duration::from_secs(60));
        assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
        let line = read_output(&pool.work.join(format!("span-{id}")));
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(parts.len(), 3, "{line}");
        let recorded: Vec<u32> = parts[0].split(',').map(|g| g.parse().unwrap()).collect();
        let allocated: Vec<u32> = job["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(
            recorded, allocated,
            "job {id} saw other GPUs than it was given"
        );
        assert_eq!(
            recorded.len(),
            job["gpus_requested"].as_u64().unwrap() as usize
        );
        for g in recorded {
            spans.entry(g).or_default().push((
                parts[1].parse().unwrap(),
                parts[2].parse().unwrap(),
                id,
            ));
        }
    }
    for (gpu, mut list) in spans {
        assert!(gpu < 4);
        list.sort();
        for w in list.windows(2) {
            assert!(
                w[0].1 <= w[1].0,
                "GPU {gpu} was held by jobs {} and {} at once",
                w[0].2,
                w[1].2
            );
        }
    }
    assert_eq!(pool.history().len(), 14);
}
