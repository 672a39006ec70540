//! Property tests that something bad never happens: invariants under random event streams,
//! backfill that never delays the top reservation, sharing that never over-commits, and
//! deterministic decisions.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::admission::AdmitRequest;
use labpool_scheduler::dependency::parse_dependencies;
use labpool_scheduler::policy::{Account, Limits};
use labpool_scheduler::{
    Allocation, Decision, JobId, JobSpec, JobState, Resources, Scheduler, TimeLimit, Timestamp,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

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
        /// Nodes: 2 or 3 make a gang.
        nodes: u32,
    },
    Finish(usize),
    NodeDown(usize),
    NodeUp(usize),
    Advance(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0usize..4, 1u32..=4, 0usize..3, 1u32..=4, 1u64..6, prop::bool::weighted(0.1), prop::option::weighted(0.2, 0usize..50), prop_oneof![4 => Just(1u32), 1 => 2u32..=3])
            .prop_map(|(user, gpus, ty, cpus, limit_h, emergency, dep, nodes)| Step::Submit { user, gpus, ty, cpus, limit_h, emergency, dep, nodes }),
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
                Step::Submit { user, gpus, ty, cpus, limit_h, emergency, dep, nodes } => {
                    let r = Resources { nodes, gpus, gpu_type: Some(TYPES[ty].to_string()), cpus, mem_mib: 0, gpu_share: false, slice: None };
                    let user = USERS[user];
                    let rq = AdmitRequest { user, account: None, partition: None, time_limit: Some(TimeLimit::Seconds(limit_h * H)), resources: &r, nodes: &labpool_scheduler::job::ANY_NODE, emergency, count: 1 };
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
                    for name in allocation.node_names() {
                        prop_assert!(s.node(name).unwrap().down.is_none(), "job {} started on down node {}", job, name);
                    }
                    let spec = s.job(job).unwrap();
                    prop_assert_eq!(allocation.others.len() + 1, spec.resources.node_count() as usize, "job {} is a gang started partly", job);
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
                *user_gpus.entry(&j.user).or_default() += a.gpu_count() as u32;
                *user_jobs.entry(&j.user).or_default() += 1;
                if j.account.as_deref() == Some("lab") { lab_gpus += a.gpu_count() as u32; }
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
                let r = Resources { nodes: 1, gpus: *g, gpu_type: Some(["t4", "a100"][*ty].into()), cpus: 1, mem_mib: 0, gpu_share: false, slice: None };
                let rq = AdmitRequest { user: USERS[*u], account: None, partition: None, time_limit: None, resources: &r, nodes: &labpool_scheduler::job::ANY_NODE, emergency: false, count: 1 };
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
