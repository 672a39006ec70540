//! The data model of the `labpool` policy on tiny traces with exact expectations: peer staging,
//! streaming of datasets larger than a cache, and delay scheduling.

use labpool_sim::config::{ClusterSpec, parse_nodes};
use labpool_sim::trace::TraceJob;
use labpool_sim::{SimInput, SimPolicy, simulate};
use std::collections::BTreeMap;

const GB: u64 = 1_000_000_000;

fn job(id: u64, submit_s: f64, dataset: &str, secs: f64) -> TraceJob {
    TraceJob {
        job_id: id,
        submit_s,
        user: "u1".into(),
        gpus: 1,
        dataset: dataset.into(),
        job_type: "test".into(),
        dur_v100_s: Some(secs),
        dur_p100_s: None,
        dur_k80_s: None,
        slice: None,
    }
}

/// Nodes of one V100, 1 GB/s shared storage, `nic` between nodes, 100 GB caches.
fn input(nodes: u32, nic: f64, jobs: Vec<TraceJob>) -> SimInput {
    let mut daemon = labpool_scheduler::policy::Policy::default();
    daemon.weights.fairshare = 0.0;
    SimInput {
        jobs,
        datasets: BTreeMap::from([("big".to_string(), 10 * GB), ("huge".to_string(), 200 * GB)]),
        cluster: ClusterSpec {
            groups: parse_nodes(&format!("{nodes}x1:v100")).unwrap(),
            ssd_bytes: 100 * GB,
            shared_bw: 1e9,
            ssd_bw: 10e9,
            nic_bw: nic,
        },
        horizon_s: 86_400,
        seed: 1,
        daemon,
        accounts: BTreeMap::new(),
    }
}

#[test]
fn a_second_node_copies_from_the_first_and_shared_storage_is_read_once() {
    // Job 1 stages `big` on one node; job 2, an hour later while job 1 still runs, must go to
    // the other node: under labpool it copies from the first at 10 GB/s (1 s), under fifo
    // from shared storage again (10 s). Under labpool each job waits for its copy without
    // its GPU (stage-in), so no GPU time waits for data; with stage-in off, the GPUs wait for
    // the 10 s and the 1 s.
    let sim = input(
        2,
        10e9,
        vec![job(1, 0.0, "big", 7200.0), job(2, 3600.0, "big", 60.0)],
    );
    let fifo = simulate(&sim, SimPolicy::Fifo).unwrap();
    let ours = simulate(&sim, SimPolicy::Labpool).unwrap();
    assert_eq!(fifo.shared_bytes, 20e9);
    assert_eq!(ours.shared_bytes, 10e9);
    assert_eq!(ours.copies.peer_bytes, 10e9);
    assert!(
        (fifo.data_wait_gpu_s - 20.0).abs() < 0.01,
        "{}",
        fifo.data_wait_gpu_s
    );
    assert_eq!(ours.data_wait_gpu_s, 0.0);
    assert_eq!(ours.mean_jct_s, fifo.mean_jct_s - 4.5);
    let mut on_gpus = sim.clone();
    on_gpus.daemon.placement.stage_in_wait_s = None;
    let on_gpus = simulate(&on_gpus, SimPolicy::Labpool).unwrap();
    assert_eq!(on_gpus.shared_bytes, 10e9);
    assert!(
        (on_gpus.data_wait_gpu_s - 11.0).abs() < 0.01,
        "{}",
        on_gpus.data_wait_gpu_s
    );
}

#[test]
fn a_dataset_larger_than_the_cache_is_streamed_and_its_reads_lengthen_the_run() {
    // 200 GB over 1 GB/s takes 200 s: a job that computes for 60 s ends at 200 s; one that
    // computes for 500 s is not slowed. Nothing is cached, nothing is refused.
    for policy in [SimPolicy::Fifo, SimPolicy::Labpool] {
        let short = simulate(&input(1, 10e9, vec![job(1, 0.0, "huge", 60.0)]), policy).unwrap();
        assert_eq!(short.jobs, 1);
        assert_eq!(short.copies.streamed_jobs, 1);
        assert_eq!(short.shared_bytes, 200e9);
        assert!(
            (short.mean_jct_s - 200.0).abs() < 0.01,
            "{}",
            short.mean_jct_s
        );
        assert_eq!(short.data_wait_gpu_s, 0.0);
        let long = simulate(&input(1, 10e9, vec![job(1, 0.0, "huge", 500.0)]), policy).unwrap();
        assert!(
            (long.mean_jct_s - 500.0).abs() < 0.01,
            "{}",
            long.mean_jct_s
        );
    }
}

#[test]
fn a_job_waits_for_the_node_with_its_data_when_that_beats_copying() {
    // Links of 100 MB/s: 10 GB take 100 s to copy, from shared storage or a peer. Five
    // warm-up jobs teach the scheduler that u1's jobs run for a thirtieth of their two-hour
    // limits (240 s). Job 6 stages `big` on the first node from 1000 s and is expected to end
    // at 1240 s. Job 7 arrives at 1200 s: the other node is free, but waiting 40 s for the
    // first beats copying for 100 s, so it waits, copies nothing and starts at 1240 s.
    let mut jobs: Vec<TraceJob> = (1..=5).map(|i| job(i, i as f64, "none", 240.0)).collect();
    jobs.push(job(6, 1000.0, "big", 140.0));
    jobs.push(job(7, 1200.0, "big", 140.0));
    let mut sim = input(2, 1e8, jobs);
    // Job 6 takes its GPU and waits for its copy on it (no stage-in), as the figures below say.
    sim.daemon.placement.stage_in_wait_s = None;
    let waited = simulate(&sim, SimPolicy::Labpool).unwrap();
    assert_eq!(waited.copies.peer_bytes, 0.0, "{waited:#?}");
    assert_eq!(waited.shared_bytes, 10e9);
    assert!(
        (waited.data_wait_gpu_s - 100.0).abs() < 0.01,
        "{}",
        waited.data_wait_gpu_s
    );
    // Without delay scheduling it copies from the first node, holding the second's GPU.
    sim.daemon.placement.locality_wait_s = None;
    let copied = simulate(&sim, SimPolicy::Labpool).unwrap();
    assert_eq!(copied.copies.peer_bytes, 10e9);
    assert!(
        (copied.data_wait_gpu_s - 200.0).abs() < 0.01,
        "{}",
        copied.data_wait_gpu_s
    );
    assert!(copied.mean_jct_s > waited.mean_jct_s);
}
