//! The trace simulator on small synthetic traces with exact expectations. (The shipped Philly
//! trace is for benchmarks, not for tests that pin numbers tuned to it.)

use labpool_sim::config::{ClusterSpec, parse_nodes};
use labpool_sim::trace::{TraceJob, parse_trace};
use labpool_sim::{SimError, SimInput, SimPolicy, simulate};
use std::collections::BTreeMap;

const GB: u64 = 1_000_000_000;

fn job(id: u64, submit_s: f64, gpus: u32, dataset: &str, secs: f64) -> TraceJob {
    TraceJob {
        job_id: id,
        submit_s,
        user: format!("u{}", id % 2),
        gpus,
        dataset: dataset.into(),
        job_type: "test".into(),
        dur_v100_s: Some(secs),
        dur_p100_s: Some(secs * 2.0),
        dur_k80_s: None,
        slice: None,
    }
}

fn input(nodes: &str, jobs: Vec<TraceJob>) -> SimInput {
    SimInput {
        jobs,
        datasets: BTreeMap::from([("big".to_string(), 10 * GB), ("small".to_string(), GB)]),
        cluster: ClusterSpec {
            groups: parse_nodes(nodes).unwrap(),
            ssd_bytes: 100 * GB,
            shared_bw: 1e9,
            ssd_bw: 2e9,
            nic_bw: 1.25e9,
        },
        horizon_s: 86_400,
        seed: 1,
        daemon: labpool_scheduler::policy::Policy::default(),
        accounts: BTreeMap::new(),
    }
}

#[test]
fn prefetch_stages_while_the_previous_job_runs() {
    // One GPU. Job 2 reads 10 GB (10 s at 1 GB/s) and waits behind job 1 for an hour.
    let sim = input(
        "1x1:v100",
        vec![job(1, 0.0, 1, "none", 3600.0), job(2, 1.0, 1, "big", 100.0)],
    );
    let fifo = simulate(&sim, SimPolicy::Fifo).unwrap();
    let pre = simulate(&sim, SimPolicy::LocalityPrefetch).unwrap();
    assert_eq!(
        fifo.data_wait_gpu_s, 10.0,
        "fifo copies after placing the job, GPU held"
    );
    assert_eq!(pre.data_wait_gpu_s, 0.0, "prefetch copied it during job 1");
    assert_eq!(fifo.shared_bytes, 10e9);
    assert_eq!(pre.shared_bytes, 10e9, "the same bytes, earlier");
    assert_eq!((fifo.cache_hit_rate, pre.cache_hit_rate), (0.0, 1.0));
    assert!(pre.mean_jct_s < fifo.mean_jct_s);
}

#[test]
fn locality_returns_jobs_to_their_data() {
    // Two one-GPU nodes. Job 0 takes the first node, so job 1 stages 'big' on the second.
    // When job 2 (also 'big') arrives both nodes are free: first fit picks the first and copies
    // again; locality picks the second and copies nothing.
    let jobs = vec![
        job(10, 0.0, 1, "none", 150.0),
        job(11, 0.0, 1, "big", 100.0),
        job(12, 500.0, 1, "big", 100.0),
    ];
    let sim = input("2x1:v100", jobs);
    let fifo = simulate(&sim, SimPolicy::Fifo).unwrap();
    let loc = simulate(&sim, SimPolicy::Locality).unwrap();
    assert_eq!(fifo.shared_bytes, 20e9);
    assert_eq!(loc.shared_bytes, 10e9);
    assert_eq!(loc.cache_hit_rate, 0.5);
}

#[test]
fn bandwidth_is_shared_among_transfers() {
    // Two nodes stage 10 GB each at once over a 1 GB/s shared link: 20 s each, not 10.
    let sim = input(
        "2x1:v100",
        vec![job(1, 0.0, 1, "big", 100.0), job(2, 0.0, 1, "big", 100.0)],
    );
    let r = simulate(&sim, SimPolicy::Fifo).unwrap();
    assert_eq!(r.data_wait_gpu_s, 40.0);
}

#[test]
fn jobs_too_big_or_on_unknown_types_are_rejected_and_types_constrain_placement() {
    let mut jobs = vec![job(1, 0.0, 8, "none", 10.0), job(2, 0.0, 2, "none", 10.0)];
    jobs[1].dur_v100_s = None; // runs only on p100
    let sim = input("1x4:v100,1x2:p100", jobs);
    let r = simulate(&sim, SimPolicy::Fifo).unwrap();
    assert_eq!((r.jobs, r.rejected, r.unfinished), (1, 1, 0));
    assert_eq!(
        r.users.iter().map(|u| u.credits).sum::<f64>(),
        2.0 * 20.0 / 3600.0 * 0.5,
        "p100 weight, p100 run time"
    );
}

#[test]
fn runs_are_deterministic_and_inputs_are_checked() {
    let jobs: Vec<TraceJob> = (0..60)
        .map(|i| {
            job(
                i,
                i as f64 * 97.0,
                [1, 2, 4][(i % 3) as usize],
                ["big", "small", "none"][(i % 3) as usize],
                500.0 + (i * 37 % 900) as f64,
            )
        })
        .collect();
    let sim = input("3x4:v100", jobs);
    for p in SimPolicy::ALL {
        assert_eq!(simulate(&sim, p).unwrap(), simulate(&sim, p).unwrap());
    }
    let mut bad = sim.clone();
    bad.jobs[0].dataset = "laion".into();
    assert!(matches!(
        simulate(&bad, SimPolicy::Fifo),
        Err(SimError::UnknownDataset { .. })
    ));
    assert!(parse_trace("not,a,trace\n1,2,3\n".as_bytes()).is_err());
}

#[test]
fn the_labpool_policy_is_the_daemons_own() {
    // The prefetch test's trace under the daemon's policy: with a prefetch horizon, job 2's
    // data is staged while job 1 runs; with none (`[cache] prefetch_horizon = "0s"`), it is
    // copied once job 2 could start, before it takes its GPU (stage-in); with neither
    // (`stage_in_wait = "0s"` too) after job 2 is placed, its GPU held, as under fifo.
    let mut sim = input(
        "1x1:v100",
        vec![job(1, 0.0, 1, "none", 3600.0), job(2, 1.0, 1, "big", 100.0)],
    );
    sim.daemon.placement.prefetch_horizon_s = Some(86_400);
    let ahead = simulate(&sim, SimPolicy::Labpool).unwrap();
    assert_eq!(ahead.policy, "labpool");
    assert_eq!(ahead.data_wait_gpu_s, 0.0);
    sim.daemon.placement.prefetch_horizon_s = None;
    let staged_in = simulate(&sim, SimPolicy::Labpool).unwrap();
    assert_eq!(staged_in.data_wait_gpu_s, 0.0);
    assert_eq!(staged_in.unfinished, 0);
    sim.daemon.placement.stage_in_wait_s = None;
    let placed = simulate(&sim, SimPolicy::Labpool).unwrap();
    assert_eq!(placed.mean_jct_s, staged_in.mean_jct_s);
    assert_eq!(placed.data_wait_gpu_s, 10.0);
    assert_eq!(placed.unfinished, 0);
    // Same seed and input: the same figures, to the byte.
    let again = simulate(&sim, SimPolicy::Labpool).unwrap();
    assert_eq!(
        format!("{placed:?}"),
        format!("{again:?}"),
        "a run is reproducible"
    );
}

#[test]
fn borrowing_fills_an_absent_groups_share_and_gives_it_back_on_its_return() {
    // Two groups of one user each, 4 GPUs each on one 8-GPU node. u0 floods the pool with
    // 1-GPU jobs of 2 h from the start; u1 comes back after 3 h with 4 jobs.
    let mut jobs: Vec<TraceJob> = (1..=16).map(|i| job(i, 0.0, 1, "none", 7200.0)).collect();
    for j in &mut jobs {
        j.user = "u0".into();
    }
    for i in 0..4 {
        let mut j = job(100 + i, 3.0 * 3600.0, 1, "none", 3600.0);
        j.user = "u1".into();
        jobs.push(j);
    }
    let base = input("1x8:v100", jobs);
    let run = |borrow: bool| {
        let with = SimInput {
            accounts: labpool_sim::accounts::equal_shares(&base.jobs, 2, 8, borrow, 0),
            ..base.clone()
        };
        simulate(&with, SimPolicy::Labpool).unwrap()
    };
    let (strict, borrowing) = (run(false), run(true));
    assert_eq!((strict.jobs, borrowing.jobs), (20, 20));
    assert_eq!(strict.preemptions, 0);
    assert!(
        borrowing.gpu_util > strict.gpu_util + 0.1,
        "{} vs {}",
        borrowing.gpu_util,
        strict.gpu_util
    );
    // u1's jobs take their share back: four borrowers stop after the 120 s grace.
    assert_eq!(borrowing.preemptions, 4);
    assert_eq!(borrowing.p95_owner_wait_s, 120.0);
    assert!(borrowing.preempt_lost_share < 0.02);
}

#[test]
fn slices_let_small_jobs_share_a_card_and_count_by_their_part() {
    // One card; four jobs of 100 s that fit a quarter. Cut in quarters, they run together;
    // whole, one after another.
    let jobs: Vec<TraceJob> = (1..=4)
        .map(|id| TraceJob {
            slice: Some(4),
            ..job(id, 0.0, 1, "none", 100.0)
        })
        .collect();
    let sliced = simulate(&input("1x1:v100/4", jobs.clone()), SimPolicy::Fifo).unwrap();
    let whole = simulate(&input("1x1:v100", jobs), SimPolicy::Fifo).unwrap();
    assert_eq!((sliced.mean_wait_s, sliced.makespan_s), (0.0, 100.0));
    assert_eq!((whole.mean_wait_s, whole.makespan_s), (150.0, 400.0));
    // Four quarters for 100 s hold the card as fully as four whole jobs for 400 s.
    assert!((sliced.gpu_util - 1.0).abs() < 1e-9, "{}", sliced.gpu_util);
    assert!((whole.gpu_util - 1.0).abs() < 1e-9, "{}", whole.gpu_util);
}
