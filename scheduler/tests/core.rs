//! The scheduling core driven through its public API: placement, reasons, reservations and
//! backfill, limits, tiers, dependencies, arrays, locality, admission, and property tests that
//! something bad never happens.

use labpool_scheduler::admission::{AdmissionError, AdmitRequest};
use labpool_scheduler::cache_view::CacheView;
use labpool_scheduler::dependency::parse_dependencies;
use labpool_scheduler::job::ArrayTask;
use labpool_scheduler::node::{GpuDevice, NodeSpec, NodeState};
use labpool_scheduler::partition::Partition;
use labpool_scheduler::policy::{Account, Limits, Policy};
use labpool_scheduler::priority::Tier;
use labpool_scheduler::{
    Allocation, Decision, JobId, JobSpec, JobState, Resources, Scheduler, TimeLimit, Timestamp,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const H: u64 = 3600;

fn partition(name: &str, default: bool, priority: u32, max_s: u64) -> Partition {
    Partition {
        name: name.into(),
        default,
        priority,
        nodes: None,
        default_time: TimeLimit::Seconds(max_s.min(H)),
        max_time: TimeLimit::Seconds(max_s),
        allow_accounts: None,
        max_gpus_per_job: None,
    }
}

fn node(name: &str, gpus: &[&str], cpus: u32) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        gpus: gpus
            .iter()
            .enumerate()
            .map(|(i, t)| GpuDevice {
                index: i as u32,
                gpu_type: t.to_string(),
                product: "virtual".into(),
                memory_mib: 0,
                uuid: None,
                share: 1,
            })
            .collect(),
        cpus,
        mem_mib: 64 * 1024,
    }
}

/// A node whose GPUs each take up to `share` sharing jobs.
fn shared_node(name: &str, gpus: &[&str], share: u32, cpus: u32) -> NodeSpec {
    let mut n = node(name, gpus, cpus);
    for g in &mut n.gpus {
        g.share = share;
    }
    n
}

fn sched() -> Scheduler {
    Scheduler::new(vec![
        partition("normal", true, 0, 86_400),
        partition("high", false, 10, H),
    ])
    .unwrap()
}

fn res(gpus: u32, ty: Option<&str>) -> Resources {
    Resources {
        gpus,
        gpu_type: ty.map(str::to_string),
        cpus: 1,
        mem_mib: 0,
        gpu_share: false,
    }
}

/// `gpus` GPUs of any type, shared (`--gpu-share`).
fn share_res(gpus: u32) -> Resources {
    Resources {
        gpu_share: true,
        ..res(gpus, None)
    }
}

fn req<'a>(user: &'a str, r: &'a Resources) -> AdmitRequest<'a> {
    AdmitRequest {
        user,
        account: None,
        partition: None,
        time_limit: None,
        resources: r,
        emergency: false,
        count: 1,
    }
}

/// A job as a test builds it: id, user, GPUs, time limit in seconds.
fn job(id: u64, user: &str, gpus: u32, limit_s: u64) -> JobSpec {
    JobSpec {
        id: JobId(id),
        name: format!("j{id}"),
        user: user.into(),
        partition: "normal".into(),
        resources: res(gpus, None),
        time_limit: TimeLimit::Seconds(limit_s),
        submit_time: Timestamp(id as i64),
        ..JobSpec::default()
    }
}

fn submit(s: &mut Scheduler, id: u64, r: Resources, partition: Option<&str>) {
    let mut rq = req("u", &r);
    rq.partition = partition;
    let a = s.admit(&rq).expect("admitted");
    s.enqueue(JobSpec {
        id: JobId(id),
        name: format!("j{id}"),
        user: "u".into(),
        account: a.account,
        partition: a.partition,
        resources: r,
        time_limit: a.time_limit,
        submit_time: Timestamp(id as i64),
        ..JobSpec::default()
    });
}

fn started(d: &[Decision]) -> BTreeMap<u64, (String, Vec<u32>)> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Start {
                job, allocation, ..
            } => Some((job.0, (allocation.node.clone(), allocation.gpus.clone()))),
            _ => None,
        })
        .collect()
}

fn ids(d: &[Decision]) -> Vec<u64> {
    started(d).keys().copied().collect()
}

fn reason(s: &Scheduler, id: u64) -> String {
    s.pending_reason(JobId(id))
        .unwrap_or_else(|| panic!("job {id} has no reason"))
        .to_string()
}

fn code(s: &Scheduler, id: u64) -> String {
    s.pending_reason(JobId(id))
        .unwrap_or_else(|| panic!("job {id} has no reason"))
        .code
        .clone()
}

fn at(h: f64) -> Timestamp {
    Timestamp((h * 3_600_000.0) as i64)
}

fn end(s: &mut Scheduler, id: u64, when: Timestamp) {
    s.finish(JobId(id), JobState::Completed, when)
        .expect("was running");
}

#[test]
fn gpus_are_handed_out_lowest_first_and_never_twice() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    for id in 1..=5 {
        submit(&mut s, id, res(1, None), None);
    }
    let d = s.schedule(Timestamp(0));
    let st = started(&d);
    assert_eq!(st.len(), 4);
    assert_eq!(st[&1].1, [0]);
    assert_eq!(st[&4].1, [3]);
    assert!(
        reason(&s, 5).starts_with("Resources (0/1 nodes fit: 1 gpus-free; reserved on box)"),
        "{}",
        reason(&s, 5)
    );
    assert_eq!(s.node("box").unwrap().state(), NodeState::Allocated);
    s.check_invariants().unwrap();

    end(&mut s, 2, Timestamp(1000));
    let d = s.schedule(Timestamp(1001));
    assert_eq!(started(&d)[&5].1, [1]);
    s.check_invariants().unwrap();
}

#[test]
fn backfill_fills_holes_without_delaying_the_reserved_job() {
    // 5 GPUs. Job 1 holds 3 GPUs for 2 h. Job 2 wants all 5: it is reserved for t = 2 h.
    // Job 3 (1 GPU, 1 h) fits in the hole and ends before 2 h: it backfills.
    // Job 4 (1 GPU, 3 h) would still run at 2 h and delay job 2: it waits (Priority), though a
    // GPU is free.
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 5], 16)).unwrap();
    s.enqueue(job(1, "u", 3, 2 * H));
    assert_eq!(ids(&s.schedule(at(0.0))), [1]);
    s.enqueue(job(2, "u", 5, H));
    s.enqueue(job(3, "u", 1, H));
    s.enqueue(job(4, "u", 1, 3 * H));
    let d = s.schedule(at(0.0));
    assert_eq!(ids(&d), [3]);
    assert_eq!(code(&s, 2), "Resources");
    assert!(
        reason(&s, 2).contains("reserved on box"),
        "{}",
        reason(&s, 2)
    );
    assert_eq!(code(&s, 4), "Priority");
    assert!(
        reason(&s, 4).contains("1 reserved; held for higher-priority jobs: box for job 2"),
        "{}",
        reason(&s, 4)
    );
    let why = s.explain(JobId(2)).unwrap();
    assert_eq!(why.reservation, Some(("box".to_string(), at(2.0))));
    assert_eq!(why.stage, "placement");
    // Job 1 ends on time; job 2 starts then, job 4 still waits behind it.
    end(&mut s, 3, at(1.0));
    end(&mut s, 1, at(2.0));
    assert_eq!(ids(&s.schedule(at(2.0))), [2]);
    s.check_invariants().unwrap();
}

#[test]
fn a_user_at_the_per_user_cap_waits_and_starts_when_a_job_ends() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    s.set_user_limits(
        "alice",
        Limits {
            max_gpus_per_user: Some(2),
            ..Limits::default()
        },
    );
    s.enqueue(job(1, "alice", 2, H));
    s.enqueue(job(2, "alice", 1, H));
    s.enqueue(job(3, "bob", 1, H));
    let d = s.schedule(at(0.0));
    assert_eq!(ids(&d), [1, 3]);
    assert_eq!(code(&s, 2), "QOSMaxGRESPerUser");
    assert!(
        reason(&s, 2)
            .contains("alice holds 2 GPUs and this job asks for 1; MaxTRESPerUser=gres/gpu=2"),
        "{}",
        reason(&s, 2)
    );
    assert_eq!(s.explain(JobId(2)).unwrap().stage, "limits");
    end(&mut s, 1, at(0.5));
    assert_eq!(ids(&s.schedule(at(0.5))), [2]);
}

#[test]
fn account_caps_wall_time_and_job_counts() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 8], 16)).unwrap();
    let members: BTreeSet<String> = ["alice", "bob"].into_iter().map(String::from).collect();
    let mut limits = Limits::default();
    limits
        .apply(&["GrpTRES=gres/gpu=3", "MaxWall=2:00:00", "MaxJobsPerUser=2"])
        .unwrap();
    s.set_account("vision", Account { members, limits });
    let spec = |id, user: &str, gpus, limit| JobSpec {
        account: Some("vision".into()),
        ..job(id, user, gpus, limit)
    };
    s.enqueue(spec(1, "alice", 2, H));
    s.enqueue(spec(2, "bob", 2, H)); // would make 4 > GrpTRES 3
    s.enqueue(spec(3, "bob", 1, 3 * H)); // over MaxWall
    s.enqueue(spec(4, "alice", 1, H));
    s.enqueue(spec(5, "alice", 0, H)); // alice already runs 2 jobs
    let d = s.schedule(at(0.0));
    assert_eq!(ids(&d), [1, 4]);
    assert_eq!(code(&s, 2), "AssocGrpGRES");
    assert_eq!(code(&s, 3), "QOSMaxWallDurationPerJobLimit");
    assert_eq!(code(&s, 5), "QOSMaxJobsPerUserLimit");
    assert_eq!(s.limits_for(&spec(9, "carol", 1, H)).grp_gpus, Some(3));
}

#[test]
fn an_overdrawn_user_runs_only_on_idle_gpus() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 16)).unwrap();
    s.set_balance("spent", -5.0);
    s.enqueue(job(1, "spent", 1, H));
    s.enqueue(job(2, "spent", 1, H));
    s.enqueue(job(3, "fresh", 1, H));
    s.enqueue(job(4, "fresh", 1, H));
    // The overdrawn user submitted first, but the GPUs go to the user in credit.
    assert_eq!(ids(&s.schedule(at(0.0))), [3, 4]);
    assert_eq!(s.explain(JobId(1)).unwrap().factors.tier, Tier::Overdrawn);
    // Once nobody in credit wants them, the idle GPUs go to the overdrawn user.
    end(&mut s, 3, at(0.5));
    assert_eq!(ids(&s.schedule(at(0.5))), [1]);
}

#[test]
fn credit_accrues_while_jobs_run() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    s.set_balance("u", 3.0);
    s.enqueue(job(1, "u", 2, 10 * H));
    s.schedule(at(0.0));
    s.enqueue(job(2, "u", 2, H));
    // 2 GPUs for 1 h cost 2 credits at weight 1, for 2 h 4: the balance of 3 is spent by then.
    let tier = |s: &Scheduler, h| {
        s.priority_order_at(at(h))
            .into_iter()
            .find(|(id, _)| *id == JobId(2))
            .unwrap()
            .1
            .tier
    };
    assert_eq!(tier(&s, 1.0), Tier::InCredit);
    assert_eq!(tier(&s, 2.0), Tier::Overdrawn);
    assert!((s.accrued("u", at(2.0)) - 4.0).abs() < 1e-9);
}

#[test]
fn an_emergency_job_jumps_the_queue() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 1], 16)).unwrap();
    s.enqueue(job(1, "a", 1, H));
    s.schedule(at(0.0));
    s.enqueue(job(2, "b", 1, H));
    s.enqueue(job(3, "c", 1, H));
    s.enqueue(JobSpec {
        emergency: true,
        ..job(4, "d", 1, H)
    });
    s.schedule(at(0.1));
    assert_eq!(s.explain(JobId(4)).unwrap().factors.tier, Tier::Emergency);
    assert_eq!(s.explain(JobId(4)).unwrap().position, 1);
    end(&mut s, 1, at(0.2));
    assert_eq!(ids(&s.schedule(at(0.2))), [4]);
}

#[test]
fn fairshare_puts_light_users_first() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 1], 16)).unwrap();
    s.record_usage("heavy", 1e6, at(0.0));
    s.enqueue(job(1, "heavy", 1, H));
    s.enqueue(job(2, "light", 1, H));
    let order = s.priority_order(at(0.0));
    assert_eq!(order, [JobId(2), JobId(1)]);
    let heavy = s
        .priority_order_at(at(0.0))
        .into_iter()
        .find(|(id, _)| *id == JobId(1))
        .unwrap()
        .1;
    assert!(heavy.fairshare < 0.5, "{heavy:?}");
}

#[test]
fn dependencies_hold_jobs_until_met() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    s.enqueue(job(1, "u", 1, H));
    s.enqueue(JobSpec {
        dependencies: parse_dependencies("afterok:1").unwrap(),
        ..job(2, "u", 1, H)
    });
    s.enqueue(JobSpec {
        dependencies: parse_dependencies("afterany:1").unwrap(),
        ..job(3, "u", 1, H)
    });
    s.enqueue(JobSpec {
        dependencies: parse_dependencies("afterok:99").unwrap(),
        ..job(4, "u", 1, H)
    });
    assert_eq!(ids(&s.schedule(at(0.0))), [1]);
    assert_eq!(reason(&s, 2), "Dependency (waits for afterok:1)");
    assert_eq!(code(&s, 4), "DependencyNeverSatisfied");
    s.finish(JobId(1), JobState::Failed, at(0.5)).unwrap();
    assert_eq!(ids(&s.schedule(at(0.5))), [3]);
    assert!(
        reason(&s, 2).starts_with("DependencyNeverSatisfied (afterok:1 can no longer be met"),
        "{}",
        reason(&s, 2)
    );
}

#[test]
fn array_throttle_limits_running_tasks() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    for t in 0..4 {
        let array = Some(ArrayTask {
            array_id: JobId(10),
            task: t,
            throttle: Some(2),
        });
        s.enqueue(JobSpec {
            array,
            ..job(10 + t as u64, "u", 1, H)
        });
    }
    assert_eq!(ids(&s.schedule(at(0.0))), [10, 11]);
    assert_eq!(code(&s, 12), "JobArrayTaskLimit");
    end(&mut s, 10, at(0.1));
    assert_eq!(ids(&s.schedule(at(0.1))), [12]);
}

struct Cached(BTreeSet<(String, String)>);

impl CacheView for Cached {
    fn cached_bytes(&self, node: &str, dataset: &str) -> u64 {
        if self.0.contains(&(node.to_string(), dataset.to_string())) {
            1 << 30
        } else {
            0
        }
    }
}

#[test]
fn locality_prefers_nodes_with_the_data_and_prefetch_stages_ahead() {
    let mut s = sched();
    for n in ["a", "b", "c"] {
        s.upsert_node(node(n, &["t4"; 2], 16)).unwrap();
    }
    let cache = Cached([("c".to_string(), "imagenet".to_string())].into());
    let reads = |id, gpus| JobSpec {
        datasets: vec!["imagenet".into()],
        ..job(id, "u", gpus, H)
    };
    s.enqueue(reads(1, 1));
    let d = s.schedule_with(at(0.0), &cache);
    assert_eq!(started(&d)[&1].0, "c");
    assert!(matches!(&d[0], Decision::Start { stage, .. } if stage.is_empty()));
    // Fill everything; a job that waits for node a gets its data staged there ahead of time.
    s.enqueue(job(2, "u", 2, H / 4));
    s.enqueue(job(3, "u", 2, 4 * H));
    s.enqueue(job(4, "u", 1, 4 * H));
    s.schedule_with(at(0.0), &cache);
    s.enqueue(reads(5, 2));
    let d = s.schedule_with(at(0.0), &cache);
    let prefetch: Vec<_> = d
        .iter()
        .filter_map(|d| match d {
            Decision::Prefetch {
                job,
                node,
                dataset,
                expected_start,
            } => Some((job.0, node.clone(), dataset.clone(), *expected_start)),
            _ => None,
        })
        .collect();
    assert_eq!(
        prefetch,
        [(5, "a".to_string(), "imagenet".to_string(), at(0.25))]
    );
}

/// A cache that is full on the nodes listed: nothing new fits there.
struct Full(BTreeSet<String>);

impl CacheView for Full {
    fn cached_bytes(&self, _node: &str, _dataset: &str) -> u64 {
        0
    }
    fn has_room(&self, node: &str, _datasets: &[String]) -> bool {
        !self.0.contains(node)
    }
}

#[test]
fn a_job_whose_data_cannot_fit_waits_with_cachefull_and_starts_elsewhere_or_later() {
    let mut s = sched();
    for n in ["a", "b"] {
        s.upsert_node(node(n, &["t4"; 2], 16)).unwrap();
    }
    let reads = |id| JobSpec {
        datasets: vec!["imagenet".into()],
        ..job(id, "u", 1, H)
    };
    // Node a's cache is full: the job goes to b, and a job without datasets may still use a.
    s.enqueue(reads(1));
    s.enqueue(job(2, "u", 2, H));
    let d = s.schedule_with(at(0.0), &Full(["a".to_string()].into()));
    let placed = started(&d);
    assert_eq!(placed[&1].0, "b");
    assert_eq!(placed[&2].0, "a");
    end(&mut s, 2, at(0.0));
    // Both full: the job waits, GPUs free, and says why; room coming back starts it.
    s.enqueue(reads(3));
    let both = Full(["a".to_string(), "b".to_string()].into());
    assert!(started(&s.schedule_with(at(0.0), &both)).is_empty());
    assert_eq!(code(&s, 3), "CacheFull");
    assert!(reason(&s, 3).contains("cache-room"), "{}", reason(&s, 3));
    let d = s.schedule_with(at(0.1), &Full(BTreeSet::new()));
    assert_eq!(ids(&d), [3]);
    // Its clock starts when staging ends, not at placement.
    assert!(s.set_started(JobId(3), at(0.5)));
    let start = s.running().find(|(j, _)| j.id == JobId(3)).unwrap().1.start;
    assert_eq!(start, at(0.5));
    assert!(!s.set_started(JobId(99), at(0.5)));
}

#[test]
fn admission_refuses_what_could_never_run() {
    let mut s = sched();
    s.upsert_node(node("small", &["t4"; 2], 4)).unwrap();
    s.upsert_node(node("big", &["t4"; 4], 8)).unwrap();
    let r8 = res(8, None);
    let e = s.admit(&req("u", &r8)).unwrap_err();
    assert!(
        matches!(&e, AdmissionError::TooManyGpus { node, most: 4, .. } if node == "big"),
        "{e}"
    );
    assert_eq!(e.hint().unwrap(), "ask for at most 4 (--gpus 4)");
    let a100 = res(1, Some("a100"));
    assert_eq!(
        s.admit(&req("u", &a100)).unwrap_err().to_string(),
        "no node in partition normal has GPUs of type 'a100'; types here: t4 (4 on big, 2 on small)"
    );
    let r1 = res(1, None);
    let mut rq = req("u", &r1);
    rq.partition = Some("gpu");
    assert_eq!(
        s.admit(&rq).unwrap_err().to_string(),
        "unknown partition 'gpu'; partitions here: normal (default), high"
    );
    rq.partition = Some("high");
    rq.time_limit = Some(TimeLimit::Seconds(7200));
    assert_eq!(
        s.admit(&rq).unwrap_err().to_string(),
        "time limit 2:00:00 is over partition high's maximum of 1:00:00"
    );
    let cpus = Resources {
        cpus: 64,
        ..res(0, None)
    };
    assert_eq!(
        s.admit(&req("u", &cpus)).unwrap_err().to_string(),
        "job asks for 64 CPUs but the largest node, big, has 8"
    );
    let t4 = res(4, Some("t4"));
    let mut rq = req("u", &t4);
    rq.partition = Some("high");
    rq.time_limit = Some(TimeLimit::Unlimited);
    let ok = s.admit(&rq).unwrap();
    assert_eq!(
        (ok.partition.as_str(), ok.time_limit),
        ("high", TimeLimit::Seconds(3600))
    );
}

#[test]
fn admission_checks_accounts_partitions_the_emergency_cap_and_submit_limits() {
    let mut high = partition("high", false, 10, H);
    high.allow_accounts = Some(vec!["deadline".into()]);
    let mut debug = partition("debug", false, 5, H);
    debug.max_gpus_per_job = Some(1);
    let mut s = Scheduler::new(vec![partition("normal", true, 0, 86_400), high, debug]).unwrap();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    let members = |u: &[&str]| u.iter().map(|s| s.to_string()).collect();
    s.set_account(
        "deadline",
        Account {
            members: members(&["alice"]),
            limits: Limits::default(),
        },
    );
    s.set_account(
        "vision",
        Account {
            members: members(&["alice", "bob"]),
            limits: Limits::default(),
        },
    );
    let r = res(1, None);
    assert_eq!(
        s.admit(&req("alice", &r)).unwrap().account.as_deref(),
        Some("deadline"),
        "first account by name"
    );
    assert_eq!(s.admit(&req("carol", &r)).unwrap().account, None);
    let mut rq = req("bob", &r);
    rq.account = Some("deadline");
    assert!(matches!(
        s.admit(&rq),
        Err(AdmissionError::NotMember { .. })
    ));
    rq.account = Some("nope");
    assert!(matches!(
        s.admit(&rq),
        Err(AdmissionError::UnknownAccount { .. })
    ));
    let mut rq = req("bob", &r);
    rq.partition = Some("high");
    let e = s.admit(&rq).unwrap_err();
    assert_eq!(
        e.to_string(),
        "partition high is only for accounts deadline; this job runs under vision"
    );
    rq.user = "alice";
    assert!(s.admit(&rq).is_ok());
    let r2 = res(2, None);
    let mut rq = req("bob", &r2);
    rq.partition = Some("debug");
    assert!(matches!(
        s.admit(&rq),
        Err(AdmissionError::PartitionGpuCap { max: 1, .. })
    ));
    let r3 = res(3, None);
    let mut rq = req("bob", &r3);
    rq.emergency = true;
    assert!(matches!(
        s.admit(&rq),
        Err(AdmissionError::EmergencyTooBig { max_gpus: 2, .. })
    ));
    s.set_user_limits(
        "bob",
        Limits {
            max_submit_jobs_per_user: Some(2),
            ..Limits::default()
        },
    );
    s.enqueue(job(1, "bob", 1, H));
    let mut rq = req("bob", &r);
    rq.count = 2;
    let e = s.admit(&rq).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bob has 1 jobs queued or running and this adds 2; MaxSubmitJobsPerUser=2"
    );
}

#[test]
fn gpu_jobs_on_gpu_less_nodes_are_told_so() {
    let mut s = sched();
    s.upsert_node(node("cpu-only", &[], 8)).unwrap();
    let e = s.admit(&req("u", &res(1, None))).unwrap_err();
    assert!(
        matches!(e, AdmissionError::NoGpus { requested: 1, .. }),
        "{e}"
    );
    assert!(e.hint().unwrap().contains("virtual_gpus"));
    assert!(s.admit(&req("u", &res(0, None))).is_ok());
}

#[test]
fn restore_refuses_conflicts() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 4)).unwrap();
    submit(&mut s, 1, res(1, None), None);
    s.schedule(Timestamp(0));
    let spec = job(9, "u", 1, 60);
    let alloc = Allocation {
        start: Timestamp(0),
        node: "box".into(),
        gpus: vec![0],
        cpus: 1,
        mem_mib: 0,
        shared: false,
    };
    let e = s.restore_running(spec.clone(), alloc.clone()).unwrap_err();
    assert!(
        e.to_string().contains("GPU 0 is already held by job 1"),
        "{e}"
    );
    let moved = Allocation {
        gpus: vec![7],
        ..alloc
    };
    assert!(
        s.restore_running(spec, moved)
            .unwrap_err()
            .to_string()
            .contains("GPU 7 no longer exists")
    );
    s.check_invariants().unwrap();
}

#[test]
fn down_nodes_give_reqnodenotavail_and_requeue_keeps_place() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 4)).unwrap();
    submit(&mut s, 1, res(1, None), None);
    assert_eq!(started(&s.schedule(Timestamp(0))).len(), 1);
    s.set_node_down("box", Some("no heartbeat".into()));
    assert_eq!(s.node("box").unwrap().state(), NodeState::Down);
    submit(&mut s, 2, res(1, None), None);
    assert!(s.requeue(JobId(1)));
    s.schedule(Timestamp(1));
    assert!(reason(&s, 1).starts_with("ReqNodeNotAvail"));
    s.set_node_down("box", None);
    assert_eq!(ids(&s.schedule(Timestamp(2))), [1, 2]);
    s.check_invariants().unwrap();
}

// ----- GPU sharing -----

/// A `--gpu-share` job as a test builds it.
fn share_job(id: u64, gpus: u32, limit_s: u64) -> JobSpec {
    let mut j = job(id, "u", gpus, limit_s);
    j.resources.gpu_share = true;
    j
}

fn holders(s: &Scheduler, node: &str, gpu: u32) -> Vec<u64> {
    s.node(node)
        .unwrap()
        .gpu_holders(gpu)
        .iter()
        .map(|j| j.0)
        .collect()
}

#[test]
fn two_sharers_hold_one_gpu_with_share_2_and_never_three() {
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"], 2, 8)).unwrap();
    for id in 1..=3 {
        submit(&mut s, id, share_res(1), None);
    }
    let d = s.schedule(Timestamp(0));
    let st = started(&d);
    assert_eq!(ids(&d), [1, 2]);
    assert_eq!(st[&1], ("box".to_string(), vec![0]));
    assert_eq!(st[&2], ("box".to_string(), vec![0]));
    assert!(d.iter().all(|d| match d {
        Decision::Start { allocation, .. } => allocation.shared,
        _ => true,
    }));
    assert_eq!(holders(&s, "box", 0), [1, 2]);
    assert_eq!(s.node("box").unwrap().gpu_owner(0), None);
    assert_eq!(
        s.node("box").unwrap().held_gpus().collect::<Vec<_>>(),
        [(0, JobId(1)), (0, JobId(2))]
    );
    assert_eq!(s.node("box").unwrap().state(), NodeState::Allocated);
    assert!(
        reason(&s, 3).starts_with("Resources (0/1 nodes fit: 1 gpus-free; reserved on box)"),
        "{}",
        reason(&s, 3)
    );
    s.check_invariants().unwrap();
    // Never three, however many passes run.
    assert!(ids(&s.schedule(Timestamp(10))).is_empty());
    assert_eq!(holders(&s, "box", 0), [1, 2]);

    // One sharer ends: the third takes its slot, on the same GPU.
    end(&mut s, 1, Timestamp(1000));
    let d = s.schedule(Timestamp(1001));
    assert_eq!(started(&d)[&3], ("box".to_string(), vec![0]));
    assert_eq!(holders(&s, "box", 0), [2, 3]);
    s.check_invariants().unwrap();
}

#[test]
fn a_whole_gpu_job_waits_while_sharers_hold_the_gpu() {
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"], 2, 8)).unwrap();
    submit(&mut s, 1, share_res(1), None);
    assert_eq!(ids(&s.schedule(Timestamp(0))), [1]);
    // One slot is left, but a whole job needs the GPU wholly free.
    submit(&mut s, 2, res(1, None), None);
    assert!(ids(&s.schedule(Timestamp(1))).is_empty());
    assert!(
        reason(&s, 2).starts_with("Resources (0/1 nodes fit: 1 gpus-free"),
        "{}",
        reason(&s, 2)
    );
    end(&mut s, 1, Timestamp(500));
    let d = s.schedule(Timestamp(501));
    assert_eq!(started(&d)[&2], ("box".to_string(), vec![0]));
    assert_eq!(s.node("box").unwrap().gpu_owner(0), Some(JobId(2)));
    // Held whole: a sharer now waits for it.
    submit(&mut s, 3, share_res(1), None);
    assert!(ids(&s.schedule(Timestamp(502))).is_empty());
    assert!(reason(&s, 3).contains("gpus-free"), "{}", reason(&s, 3));
    s.check_invariants().unwrap();
    end(&mut s, 2, Timestamp(600));
    assert_eq!(ids(&s.schedule(Timestamp(601))), [3]);
    s.check_invariants().unwrap();
}

#[test]
fn sharers_backfill_only_where_they_do_not_delay_a_whole_reservation() {
    // One GPU, share 2. Sharer 1 runs for 2 h. Whole job 2 (1 h) is reserved for t = 2 h.
    // Sharer 3 (3 h) would still hold a slot at 2 h: it waits, though a slot is free.
    // Sharer 4 (1 h) ends before 2 h: it backfills next to sharer 1.
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"], 2, 8)).unwrap();
    s.enqueue(share_job(1, 1, 2 * H));
    assert_eq!(ids(&s.schedule(at(0.0))), [1]);
    s.enqueue(job(2, "u", 1, H));
    s.enqueue(share_job(3, 1, 3 * H));
    s.enqueue(share_job(4, 1, H));
    let d = s.schedule(at(0.0));
    assert_eq!(ids(&d), [4]);
    assert_eq!(started(&d)[&4].1, [0]);
    assert_eq!(code(&s, 2), "Resources");
    assert_eq!(
        s.explain(JobId(2)).unwrap().reservation,
        Some(("box".to_string(), at(2.0)))
    );
    assert_eq!(code(&s, 3), "Priority");
    assert!(
        reason(&s, 3).contains("held for higher-priority jobs: box for job 2"),
        "{}",
        reason(&s, 3)
    );
    s.check_invariants().unwrap();
    end(&mut s, 4, at(1.0));
    assert!(ids(&s.schedule(at(1.0))).is_empty());
    end(&mut s, 1, at(2.0));
    assert_eq!(ids(&s.schedule(at(2.0))), [2]);
    end(&mut s, 2, at(3.0));
    assert_eq!(ids(&s.schedule(at(3.0))), [3]);
    s.check_invariants().unwrap();
}

#[test]
fn a_sharing_job_needs_a_shareable_gpu() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 8)).unwrap();
    let r = share_res(1);
    let e = s.admit(&req("u", &r)).unwrap_err();
    assert!(
        matches!(&e, AdmissionError::NoShareableGpus { requested: 1, .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "job asks to share 1 GPUs (--gpu-share) but no node in partition normal has 1 shareable GPUs (share > 1); no GPU here is shared"
    );
    assert!(e.hint().unwrap().contains("leave out --gpu-share"));
    // Queued anyway (say, before an admin made the GPUs whole again): it waits, and says why.
    s.enqueue(share_job(1, 1, H));
    assert!(ids(&s.schedule(Timestamp(0))).is_empty());
    assert_eq!(reason(&s, 1), "BadConstraints (0/1 nodes fit: 1 gpu-share)");
    // Another node shares one GPU: a 1-GPU sharer is admitted, a 2-GPU sharer is not.
    let mut one = shared_node("mix", &["t4"; 2], 1, 8);
    one.gpus[1].share = 2;
    s.upsert_node(one).unwrap();
    assert!(s.admit(&req("u", &r)).is_ok());
    let two = share_res(2);
    assert_eq!(
        s.admit(&req("u", &two)).unwrap_err().to_string(),
        "job asks to share 2 GPUs (--gpu-share) but no node in partition normal has 2 shareable GPUs (share > 1); shareable: 1 on mix"
    );
    let d = s.schedule(Timestamp(1));
    assert_eq!(started(&d)[&1], ("mix".to_string(), vec![1]));
    s.check_invariants().unwrap();
}

#[test]
fn sharers_pack_onto_one_gpu_and_leave_the_other_whole() {
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"; 2], 2, 8)).unwrap();
    submit(&mut s, 1, share_res(1), None);
    submit(&mut s, 2, share_res(1), None);
    submit(&mut s, 3, res(1, None), None);
    let d = s.schedule(Timestamp(0));
    let st = started(&d);
    assert_eq!(st[&1].1, [0]);
    assert_eq!(st[&2].1, [0]);
    assert_eq!(st[&3].1, [1]);
    assert_eq!(s.node("box").unwrap().gpu_owner(1), Some(JobId(3)));
    s.check_invariants().unwrap();
    // With GPU 0 held whole, sharers go to GPU 1 and join each other there.
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"; 2], 2, 8)).unwrap();
    submit(&mut s, 1, res(1, None), None);
    s.schedule(Timestamp(0));
    submit(&mut s, 2, share_res(1), None);
    submit(&mut s, 3, share_res(1), None);
    let st = started(&s.schedule(Timestamp(1)));
    assert_eq!((st[&2].1.clone(), st[&3].1.clone()), (vec![1], vec![1]));
    s.check_invariants().unwrap();
}

#[test]
fn a_sharer_joins_a_node_with_sharers_before_breaking_a_whole_gpu() {
    // Node a: three GPUs, one of them shared by a running job. Node b: one wholly free GPU.
    // Bin-packing alone would pick b (fullest afterwards); the sharer joins GPU 0 of a instead.
    let mut s = sched();
    s.upsert_node(shared_node("a", &["t4"; 3], 2, 8)).unwrap();
    s.upsert_node(shared_node("b", &["t4"], 2, 8)).unwrap();
    let alloc = Allocation {
        start: Timestamp(0),
        node: "a".into(),
        gpus: vec![0],
        cpus: 1,
        mem_mib: 0,
        shared: true,
    };
    s.restore_running(share_job(1, 1, H), alloc).unwrap();
    submit(&mut s, 2, share_res(1), None);
    let st = started(&s.schedule(Timestamp(1)));
    assert_eq!(st[&2], ("a".to_string(), vec![0]));
    // A whole job still takes the fullest node.
    submit(&mut s, 3, res(1, None), None);
    assert_eq!(started(&s.schedule(Timestamp(2)))[&3].0, "b");
    s.check_invariants().unwrap();
}

#[test]
fn restore_respects_share_slots() {
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"; 2], 2, 8)).unwrap();
    let shared = |gpu| Allocation {
        start: Timestamp(0),
        node: "box".into(),
        gpus: vec![gpu],
        cpus: 1,
        mem_mib: 0,
        shared: true,
    };
    s.restore_running(share_job(1, 1, H), shared(0)).unwrap();
    s.restore_running(share_job(2, 1, H), shared(0)).unwrap();
    let e = s
        .restore_running(share_job(3, 1, H), shared(0))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("GPU 0 already has 2 sharing jobs (1, 2)"),
        "{e}"
    );
    let whole = Allocation {
        shared: false,
        ..shared(0)
    };
    let e = s.restore_running(job(4, "u", 1, H), whole).unwrap_err();
    assert!(
        e.to_string()
            .contains("GPU 0 is already shared by jobs 1, 2"),
        "{e}"
    );
    s.restore_running(
        job(5, "u", 1, H),
        Allocation {
            shared: false,
            ..shared(1)
        },
    )
    .unwrap();
    let e = s
        .restore_running(share_job(6, 1, H), shared(1))
        .unwrap_err();
    assert!(e.to_string().contains("already held by job 5"), "{e}");
    s.check_invariants().unwrap();
    assert_eq!(s.node("box").unwrap().state(), NodeState::Allocated);
    // Requeue gives a sharer's slot back.
    assert!(s.requeue(JobId(1)));
    assert_eq!(holders(&s, "box", 0), [2]);
    s.check_invariants().unwrap();
}

// ----- property tests -----

#[derive(Debug, Clone)]
enum Step {
    Submit {
        user: usize,
        gpus: u32,
        ty: usize,
        cpus: u32,
        limit_h: u64,
        emergency: bool,
        dep: Option<usize>,
    },
    Finish(usize),
    NodeDown(usize),
    NodeUp(usize),
    Advance(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0usize..4, 1u32..=4, 0usize..3, 1u32..=4, 1u64..6, prop::bool::weighted(0.1), prop::option::weighted(0.2, 0usize..50))
            .prop_map(|(user, gpus, ty, cpus, limit_h, emergency, dep)| Step::Submit { user, gpus, ty, cpus, limit_h, emergency, dep }),
        3 => any::<usize>().prop_map(Step::Finish),
        1 => any::<usize>().prop_map(Step::NodeDown),
        1 => any::<usize>().prop_map(Step::NodeUp),
        2 => (1u64..7200).prop_map(Step::Advance),
    ]
}

const USERS: [&str; 4] = ["ann", "ben", "cy", "di"];
const TYPES: [&str; 3] = ["a100", "t4", "v100"];

fn limited() -> Scheduler {
    let mut s = sched();
    s.set_user_limits(
        "ann",
        Limits {
            max_gpus_per_user: Some(3),
            max_jobs_per_user: Some(2),
            ..Limits::default()
        },
    );
    let members: BTreeSet<String> = ["ben", "cy"].into_iter().map(String::from).collect();
    s.set_account(
        "lab",
        Account {
            members,
            limits: Limits {
                grp_gpus: Some(5),
                ..Limits::default()
            },
        },
    );
    s.set_balance("di", -1.0);
    s
}

/// Runs `s` from time 0, each running job ending after its `runtime`, until nothing runs;
/// checks the invariants after every pass and that the top waiting job's reservation never
/// moves later and no job starts after it. `on_start` sees every start.
fn run_to_the_end_keeping_reservations(
    s: &mut Scheduler,
    runtime: &BTreeMap<u64, u64>,
    mut on_start: impl FnMut(&Scheduler, JobId, &Allocation) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let mut now = Timestamp(0);
    let mut promised: BTreeMap<JobId, Timestamp> = BTreeMap::new();
    for _ in 0..200 {
        for d in s.schedule(now) {
            if let Decision::Start {
                job, allocation, ..
            } = d
            {
                on_start(s, job, &allocation)?;
            }
        }
        s.check_invariants().map_err(TestCaseError::fail)?;
        // The first waiting job in priority order is the top job; its reservation may only
        // move earlier.
        if let Some(top) = s.priority_order(now).first().copied()
            && let Some((_, at)) = s.explain(top).and_then(|n| n.reservation.clone())
        {
            let p = promised.entry(top).or_insert(at);
            prop_assert!(
                at <= *p,
                "job {} was promised {:?} but now gets {:?}",
                top,
                p,
                at
            );
            *p = at;
        }
        for (id, at) in &promised {
            if let Some((_, a)) = s.running().find(|(j, _)| j.id == *id) {
                prop_assert!(
                    a.start <= *at,
                    "job {} started at {:?}, after its reservation {:?}",
                    id,
                    a.start,
                    at
                );
            }
        }
        // Advance to the next job end.
        let next_end = s
            .running()
            .map(|(j, a)| a.start.plus_secs(runtime[&j.id.0]))
            .min();
        let Some(t) = next_end else { break };
        now = t;
        let ending: Vec<JobId> = s
            .running()
            .filter(|(j, a)| a.start.plus_secs(runtime[&j.id.0]) <= now)
            .map(|(j, _)| j.id)
            .collect();
        for id in ending {
            s.finish(id, JobState::Completed, now);
        }
        s.check_invariants().map_err(TestCaseError::fail)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    /// Something bad never happens, after every step: no GPU is held twice, no node is
    /// over-committed, no QOS limit is exceeded, and no job runs before its dependencies.
    #[test]
    fn invariants_hold_under_random_streams(
        shapes in prop::collection::vec((1usize..=8, 0usize..3, 2u32..=16), 1..5),
        steps in prop::collection::vec(step(), 1..150),
    ) {
        let mut s = limited();
        for (i, (n, ty, cpus)) in shapes.iter().enumerate() {
            s.upsert_node(node(&format!("n{i}"), &vec![TYPES[*ty]; *n], *cpus)).unwrap();
        }
        let mut now = Timestamp(0);
        let mut next = 1u64;
        let mut outcome: BTreeMap<u64, bool> = BTreeMap::new();
        for st in steps {
            match st {
                Step::Submit { user, gpus, ty, cpus, limit_h, emergency, dep } => {
                    let r = Resources { gpus, gpu_type: Some(TYPES[ty].to_string()), cpus, mem_mib: 0, gpu_share: false };
                    let user = USERS[user];
                    let rq = AdmitRequest { user, account: None, partition: None, time_limit: Some(TimeLimit::Seconds(limit_h * H)), resources: &r, emergency, count: 1 };
                    if let Ok(a) = s.admit(&rq) {
                        let dependencies = dep.filter(|d| (*d as u64) < next).map(|d| parse_dependencies(&format!("afterok:{}", d + 1)).unwrap()).unwrap_or_default();
                        s.enqueue(JobSpec {
                            id: JobId(next), name: "p".into(), user: user.into(), account: a.account, partition: a.partition,
                            resources: r, time_limit: a.time_limit, submit_time: now, emergency, dependencies, ..JobSpec::default()
                        });
                        next += 1;
                    }
                }
                Step::Finish(k) => {
                    let running: Vec<JobId> = s.running().map(|(j, _)| j.id).collect();
                    if !running.is_empty() {
                        let id = running[k % running.len()];
                        let state = if k % 3 == 0 { JobState::Failed } else { JobState::Completed };
                        s.finish(id, state, now);
                        outcome.insert(id.0, state == JobState::Completed);
                    }
                }
                Step::NodeDown(k) => { s.set_node_down(&format!("n{}", k % shapes.len()), Some("test".into())); }
                Step::NodeUp(k) => { s.set_node_down(&format!("n{}", k % shapes.len()), None); }
                Step::Advance(secs) => now = now.plus_secs(secs),
            }
            for d in s.schedule(now) {
                if let Decision::Start { allocation, job, .. } = d {
                    prop_assert!(s.node(&allocation.node).unwrap().down.is_none(), "job {} started on a down node", job);
                    let spec = s.job(job).unwrap();
                    for dep in &spec.dependencies {
                        prop_assert_eq!(outcome.get(&dep.job.0), Some(&true), "job {} started before {}", job, dep);
                    }
                }
            }
            s.check_invariants().map_err(TestCaseError::fail)?;
            let mut user_gpus: BTreeMap<&str, u32> = BTreeMap::new();
            let mut user_jobs: BTreeMap<&str, u32> = BTreeMap::new();
            let mut lab_gpus = 0;
            for (j, a) in s.running() {
                *user_gpus.entry(&j.user).or_default() += a.gpus.len() as u32;
                *user_jobs.entry(&j.user).or_default() += 1;
                if j.account.as_deref() == Some("lab") { lab_gpus += a.gpus.len() as u32; }
            }
            prop_assert!(user_gpus.get("ann").copied().unwrap_or(0) <= 3, "MaxTRESPerUser broken");
            prop_assert!(user_jobs.get("ann").copied().unwrap_or(0) <= 2, "MaxJobsPerUser broken");
            prop_assert!(lab_gpus <= 5, "GrpTRES broken: {}", lab_gpus);
        }
    }

    /// A backfilled job never delays the top reserved job: jobs submitted together by one user
    /// keep their order, and the first one's reserved start never moves later, even though
    /// jobs end at random times before their limits.
    #[test]
    fn backfill_never_delays_the_top_reservation(
        jobs in prop::collection::vec((1u32..=4, 1u64..10, 1u64..=100), 2..30),
    ) {
        let mut s = sched();
        s.upsert_node(node("a", &["t4"; 4], 64)).unwrap();
        s.upsert_node(node("b", &["t4"; 2], 64)).unwrap();
        let mut runtime = BTreeMap::new();
        for (i, (gpus, limit_h, pct)) in jobs.iter().enumerate() {
            let id = i as u64 + 1;
            s.enqueue(job(id, "u", *gpus, limit_h * H));
            runtime.insert(id, (limit_h * H * pct / 100).max(1));
        }
        run_to_the_end_keeping_reservations(&mut s, &runtime, |_, _, _| Ok(()))?;
        prop_assert_eq!(s.pending().count(), 0, "every job ran");
    }

    /// With sharing and whole jobs mixed on nodes of share 1 to 3: a GPU never has more
    /// sharers than its share, nor a whole holder and sharers together (check_invariants), the
    /// top job's reservation never moves later, no job starts after its reservation, and every
    /// job runs.
    #[test]
    fn sharing_never_over_commits_nor_delays_the_top_reservation(
        nodes in prop::collection::vec((1usize..=3, 1u32..=3), 1..3),
        jobs in prop::collection::vec((1u32..=2, prop::bool::ANY, 1u64..10, 1u64..=100), 2..30),
    ) {
        let mut s = sched();
        for (i, (n, share)) in nodes.iter().enumerate() {
            s.upsert_node(shared_node(&format!("n{i}"), &vec!["t4"; *n], *share, 64)).unwrap();
        }
        let mut runtime = BTreeMap::new();
        for (i, (gpus, shared, limit_h, pct)) in jobs.iter().enumerate() {
            let id = i as u64 + 1;
            let r = Resources { gpu_share: *shared, ..res(*gpus, None) };
            let mut rq = req("u", &r);
            rq.time_limit = Some(TimeLimit::Seconds(limit_h * H));
            if s.admit(&rq).is_err() {
                continue;
            }
            let mut j = job(id, "u", *gpus, limit_h * H);
            j.resources.gpu_share = *shared;
            s.enqueue(j);
            runtime.insert(id, (limit_h * H * pct / 100).max(1));
        }
        run_to_the_end_keeping_reservations(&mut s, &runtime, |s, job, allocation| {
            prop_assert_eq!(allocation.shared, s.job(job).unwrap().resources.gpu_share);
            Ok(())
        })?;
        prop_assert_eq!(s.pending().count(), 0, "every job ran");
    }

    /// The same events give the same decisions.
    #[test]
    fn decisions_are_deterministic(jobs in prop::collection::vec((1u32..=4, 0usize..2, 0usize..4), 1..40)) {
        let run = || {
            let mut s = limited();
            s.upsert_node(node("a", &["t4"; 4], 8)).unwrap();
            s.upsert_node(node("b", &["a100"; 2], 8)).unwrap();
            let mut out = Vec::new();
            for (i, (g, ty, u)) in jobs.iter().enumerate() {
                let r = Resources { gpus: *g, gpu_type: Some(["t4", "a100"][*ty].into()), cpus: 1, mem_mib: 0, gpu_share: false };
                let rq = AdmitRequest { user: USERS[*u], account: None, partition: None, time_limit: None, resources: &r, emergency: false, count: 1 };
                if let Ok(a) = s.admit(&rq) {
                    s.enqueue(JobSpec { id: JobId(i as u64 + 1), user: USERS[*u].into(), account: a.account, partition: a.partition,
                        resources: r, time_limit: a.time_limit, submit_time: at(i as f64 / 10.0), ..JobSpec::default() });
                }
                out.extend(s.schedule(at(i as f64 / 10.0)));
                if i % 3 == 0 {
                    let first = s.running().map(|(j, _)| j.id).next();
                    if let Some(j) = first { s.finish(j, JobState::Completed, at(i as f64 / 10.0)); }
                }
            }
            out
        };
        prop_assert_eq!(run(), run());
    }
}

#[test]
fn seeded_node_order_is_reproducible() {
    let build = |seed| {
        let mut policy = Policy::default();
        policy.placement.node_order_seed = Some(seed);
        policy.placement.binpack = false;
        policy.placement.locality = false;
        let mut s =
            Scheduler::with_policy(vec![partition("normal", true, 0, 86_400)], policy).unwrap();
        for n in 0..8 {
            s.upsert_node(node(&format!("n{n}"), &["t4"; 1], 4))
                .unwrap();
        }
        s.enqueue(job(1, "u", 1, H));
        started(&s.schedule(at(0.0)))[&1].0.clone()
    };
    assert_eq!(build(7), build(7));
    let spread: BTreeSet<String> = (0..16).map(build).collect();
    assert!(
        spread.len() > 1,
        "different seeds try nodes in different orders"
    );
}

#[test]
fn account_per_user_limits_count_only_that_accounts_jobs() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 8], 16)).unwrap();
    let members = |u: &[&str]| u.iter().map(|s| s.to_string()).collect();
    s.set_account(
        "nlp",
        Account {
            members: members(&["bob"]),
            limits: Limits::default(),
        },
    );
    let capped = Limits {
        max_gpus_per_user: Some(2),
        ..Limits::default()
    };
    s.set_account(
        "vision",
        Account {
            members: members(&["bob"]),
            limits: capped,
        },
    );
    s.enqueue(JobSpec {
        account: Some("nlp".into()),
        ..job(1, "bob", 4, H)
    });
    s.enqueue(JobSpec {
        account: Some("vision".into()),
        ..job(2, "bob", 2, H)
    });
    s.enqueue(JobSpec {
        account: Some("vision".into()),
        ..job(3, "bob", 1, H)
    });
    assert_eq!(
        ids(&s.schedule(at(0.0))),
        [1, 2],
        "bob's nlp GPUs do not count against vision's cap"
    );
    assert!(
        reason(&s, 3).contains("bob holds 2 GPUs in account vision"),
        "{}",
        reason(&s, 3)
    );
}

#[test]
fn jobs_wait_when_their_account_or_partition_access_goes_away() {
    let mut high = partition("high", false, 10, H);
    high.allow_accounts = Some(vec!["deadline".into()]);
    let mut s = Scheduler::new(vec![partition("normal", true, 0, 86_400), high]).unwrap();
    s.upsert_node(node("box", &["t4"; 1], 16)).unwrap();
    let alice: BTreeSet<String> = ["alice".to_string()].into();
    s.set_account(
        "deadline",
        Account {
            members: alice,
            limits: Limits::default(),
        },
    );
    s.enqueue(JobSpec {
        account: Some("deadline".into()),
        partition: "high".into(),
        ..job(1, "alice", 1, H)
    });
    s.remove_account("deadline");
    s.schedule(at(0.0));
    assert_eq!(code(&s, 1), "InvalidAccount");
    assert!(
        reason(&s, 1).contains("account deadline was removed"),
        "{}",
        reason(&s, 1)
    );
    s.set_account(
        "deadline",
        Account {
            members: BTreeSet::new(),
            limits: Limits::default(),
        },
    );
    s.schedule(at(0.1));
    assert!(
        reason(&s, 1).contains("alice is no longer in account deadline"),
        "{}",
        reason(&s, 1)
    );
}

#[test]
fn fairshare_counts_jobs_still_running() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 8], 16)).unwrap();
    s.enqueue(job(1, "busy", 8, 100 * H));
    s.schedule(at(0.0));
    s.enqueue(job(2, "busy", 1, H));
    s.enqueue(job(3, "idle", 1, H));
    // Three days on 8 GPUs and nothing finished yet: busy is not a light user.
    let order = s.priority_order_at(at(72.0));
    assert_eq!(order[0].0, JobId(3));
    assert!(order[1].1.fairshare < 0.5, "{:?}", order[1].1);
}
