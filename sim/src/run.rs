//! The simulation loop: arrivals, ends, a scheduling pass, stages, then the clock jumps to the
//! next thing that happens. Job state lives in the lifecycle core, exactly as in the daemon.

use crate::config::ClusterSpec;
use crate::report::{self, JobRecord, SimReport};
use crate::trace::TraceJob;
use crate::world::{Kind, SimNode, World};
use crate::{SimError, SimInput, SimPolicy, scheduler_policy};
use labpool_lifecycle::{
    Effect, Event, JobLife, Lifecycle, Outcome, Placement, Readiness, StageKind,
};
use labpool_scheduler::node::{GpuDevice, NodeSpec};
use labpool_scheduler::partition::Partition;
use labpool_scheduler::{
    Decision, JobId, JobSpec, JobState, Resources, Scheduler, TimeLimit, Timestamp,
};
use std::collections::{BTreeMap, BTreeSet};

/// The time limit a simulated job is submitted with: its longest run time on the cluster's GPU
/// types, a quarter more, an hour, and four times what copying its dataset alone takes (the
/// limit runs while data is staged), rounded up to the hour, as users write them.
fn time_limit_for(job: &TraceJob, cluster: &ClusterSpec, dataset_bytes: u64) -> TimeLimit {
    let longest = cluster
        .groups
        .iter()
        .filter_map(|g| job.duration_on(&g.gpu_type))
        .fold(0.0f64, f64::max);
    let staging = 4.0 * dataset_bytes as f64 / cluster.shared_bw.min(cluster.ssd_bw);
    let secs = longest * 1.25 + 3600.0 + staging;
    TimeLimit::Seconds(((secs / 3600.0).ceil() as u64).max(1) * 3600)
}

/// The slice a trace job holds: `1/slice` of a card where a group of its type cuts cards so;
/// `None` (whole GPUs) otherwise.
fn slice_for(
    job: &TraceJob,
    cluster: &crate::config::ClusterSpec,
) -> Option<labpool_scheduler::slice::Slice> {
    let d = job.slice.filter(|_| job.gpus == 1)?;
    let ty = gpu_type_for(job, cluster);
    cluster
        .groups
        .iter()
        .any(|g| g.slices.contains(&d) && ty.as_deref().is_none_or(|t| t == g.gpu_type))
        .then_some(labpool_scheduler::slice::Slice::Fraction(d))
}

/// The GPU type a job must run on: none when every type in the cluster will do, else the
/// first type (in the spec's order) it has a run time for and fits on.
fn gpu_type_for(job: &TraceJob, cluster: &ClusterSpec) -> Option<String> {
    if cluster
        .groups
        .iter()
        .all(|g| job.duration_on(&g.gpu_type).is_some())
    {
        return None;
    }
    cluster
        .groups
        .iter()
        .find(|g| g.gpus >= job.gpus && job.duration_on(&g.gpu_type).is_some())
        .map(|g| g.gpu_type.clone())
}

/// Replays `input` under `policy`.
pub fn simulate(input: &SimInput, policy: SimPolicy) -> Result<SimReport, SimError> {
    for j in &input.jobs {
        if j.dataset != "none" && !input.datasets.contains_key(&j.dataset) {
            return Err(SimError::UnknownDataset {
                job: j.job_id,
                dataset: j.dataset.clone(),
            });
        }
    }
    let partition = Partition {
        name: "sim".into(),
        default: true,
        priority: 0,
        nodes: None,
        default_time: TimeLimit::Unlimited,
        max_time: TimeLimit::Unlimited,
        allow_accounts: None,
        max_gpus_per_job: None,
        default_slice: None,
    };
    let mut sched = Scheduler::with_policy(vec![partition], scheduler_policy(input, policy))
        .expect("one default partition");
    for (name, account) in &input.accounts {
        sched.set_account(name, account.clone());
    }
    let grace_s = sched.policy().preemption.grace_s;
    let total_gpus: u32 = input.cluster.groups.iter().map(|g| g.count * g.gpus).sum();
    let min_runtime_s = sched.policy().preemption.min_runtime_s;
    let mut nodes = Vec::new();
    for (g, group) in input.cluster.groups.iter().enumerate() {
        for i in 0..group.count {
            let name = format!("{}-{g}-{i:02}", group.gpu_type);
            let gpus = (0..group.gpus)
                .map(|index| GpuDevice {
                    index,
                    gpu_type: group.gpu_type.clone(),
                    product: "sim".into(),
                    memory_mib: 0,
                    uuid: None,
                    share: labpool_scheduler::slice::shards_of(&group.slices).unwrap_or(1),
                    slices: group.slices.clone(),
                    nvlink_peer: None,
                })
                .collect();
            sched
                .upsert_node(NodeSpec {
                    name: name.clone(),
                    gpus,
                    cpus: group.gpus * 8,
                    mem_mib: 0,
                    features: vec![],
                })
                .expect("at most 64 GPUs per node");
            nodes.push(SimNode {
                name,
                gpu_type: group.gpu_type.clone(),
                cache: BTreeMap::new(),
            });
        }
    }
    let mut arrivals: Vec<&TraceJob> = input.jobs.iter().collect();
    arrivals.sort_by(|a, b| {
        a.submit_s
            .total_cmp(&b.submit_s)
            .then(a.job_id.cmp(&b.job_id))
    });
    let (runnable, rejected): (Vec<&TraceJob>, Vec<&TraceJob>) =
        arrivals.into_iter().partition(|j| input.cluster.runs(j));

    let mut world = World {
        input,
        policy,
        nodes,
        transfers: Vec::new(),
        life: Lifecycle::new(),
        placed: BTreeMap::new(),
        running: BTreeMap::new(),
        trace: BTreeMap::new(),
        records: Vec::new(),
        shared_bytes: 0.0,
        hits: 0,
        needs: 0,
        next_use: BTreeMap::new(),
        prefetched: BTreeSet::new(),
        staging_in: BTreeMap::new(),
        starting: BTreeSet::new(),
        preempt: Default::default(),
        streaming: BTreeMap::new(),
        counts: Default::default(),
    };
    let mut next_arrival = 0usize;
    let mut now = Timestamp(0);
    loop {
        // Arrivals due now.
        while next_arrival < runnable.len()
            && Timestamp((runnable[next_arrival].submit_s * 1000.0) as i64) <= now
        {
            let j = runnable[next_arrival];
            let id = JobId(j.job_id);
            let account = sched.default_account(&j.user).map(str::to_string);
            if let Some(a) = &account {
                let share = sched.accounts()[a].limits.grp_gpus.unwrap_or(u32::MAX);
                let held = sched.running_holdings().account_milli(a) / 1000;
                // A returning owner: its account is within its share and has nothing waiting.
                let queued = sched.pending().any(|p| p.account.as_ref() == Some(a));
                if held + j.gpus <= share && !queued {
                    world.preempt.owners.insert(id);
                }
            }
            sched.enqueue(JobSpec {
                id,
                name: j.job_type.clone(),
                user: j.user.clone(),
                account,
                partition: "sim".into(),
                resources: Resources {
                    nodes: 1,
                    gpus: j.gpus,
                    gpu_type: gpu_type_for(j, &input.cluster),
                    cpus: 1,
                    mem_mib: 0,
                    gpu_share: false,
                    slice: slice_for(j, &input.cluster),
                },
                time_limit: time_limit_for(
                    j,
                    &input.cluster,
                    input.datasets.get(&j.dataset).copied().unwrap_or(0),
                ),
                submit_time: Timestamp((j.submit_s * 1000.0) as i64),
                datasets: if j.dataset == "none" {
                    Vec::new()
                } else {
                    vec![j.dataset.clone()]
                },
                ..JobSpec::default()
            });
            world.life.admit(id.0, JobLife::pending(true));
            world.trace.insert(id, j);
            next_arrival += 1;
        }
        // Jobs that end now, or are stopped at the end of their grace: their nodes report it,
        // as an agent would.
        let mut ending: Vec<(JobId, Timestamp, JobState)> = world
            .running
            .iter()
            .filter(|(_, (_, end))| *end <= now)
            .map(|(id, (_, end))| (*id, *end, JobState::Completed))
            .collect();
        for (id, stop) in world.preempt.due(now) {
            if !ending.iter().any(|(e, _, _)| *e == id) && world.running.contains_key(&id) {
                ending.push((id, stop, JobState::Cancelled));
            }
        }
        for (id, end, state) in ending {
            let Some(l) = world.life.job(id.0) else {
                continue;
            };
            let event = Event::Ended {
                node: l.node.clone().unwrap_or_default(),
                job: id.0,
                attempt: l.attempt,
                outcome: Outcome {
                    state,
                    exit_code: Some(0),
                    signal: None,
                    end_time_ms: end.0,
                    reason: None,
                },
            };
            let effects = world.life.handle(event, now.0);
            apply(&mut world, &mut sched, effects, now, grace_s);
        }

        // A pass, seeing the caches as they are now.
        let order = sched.priority_order(now);
        world.next_use.clear();
        for (pos, id) in order.iter().enumerate() {
            if let Some(j) = world.trace.get(id) {
                world.next_use.entry(j.dataset.clone()).or_insert(pos);
            }
        }
        let decisions = sched.schedule_with(now, &world);
        // A pass's starts are placed together, before any of their copies makes room: what
        // one of them reads is not evicted for another's.
        world.starting = decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Start {
                    job, allocation, ..
                } => {
                    let node = world.node_index(&allocation.node)?;
                    Some((node, world.trace[job].dataset.clone()))
                }
                _ => None,
            })
            .collect();
        for d in decisions {
            match d {
                Decision::Start {
                    job, allocation, ..
                } => {
                    let node = world
                        .node_index(&allocation.node)
                        .expect("a simulated node");
                    let dataset = world.trace[&job].dataset.clone();
                    let complete = world.complete(node, &dataset);
                    if world.dataset_bytes(&dataset) > 0 && !world.streamed(&dataset) {
                        world.needs += 1;
                        if complete {
                            world.hits += 1;
                        }
                    }
                    world.placed_on(job, node);
                    world.placed.insert(job, (node, now));
                    world.preempt.first_placed.entry(job).or_insert(now);
                    let ready = if complete {
                        world.ensure(node, &dataset, now, Kind::Stage);
                        Readiness::Ready {
                            isolation: "simulated".into(),
                        }
                    } else {
                        Readiness::Stage(StageKind::Data, format!("staging {dataset}"))
                    };
                    let placement = Placement {
                        node: allocation.node,
                        gpus: allocation.gpus,
                        stdout: Default::default(),
                        stderr: Default::default(),
                        others: allocation.others,
                        ports: allocation.ports,
                    };
                    let event = Event::Placed {
                        job: job.0,
                        placement,
                        ready,
                    };
                    let effects = world.life.handle(event, now.0);
                    apply(&mut world, &mut sched, effects, now, grace_s);
                }
                Decision::Preempt { job, by, cause } => {
                    let event = Event::Preempt {
                        job: job.0,
                        by: by.0,
                        cause,
                    };
                    let effects = world.life.handle(event, now.0);
                    apply(&mut world, &mut sched, effects, now, grace_s);
                }
                Decision::Prefetch {
                    job, node, dataset, ..
                } if world.policy.stages_ahead() => {
                    let i = world.node_index(&node).expect("a simulated node");
                    if !world.prefetched.contains(&(job, i, dataset.clone()))
                        && world.ensure(i, &dataset, now, Kind::Prefetch(job))
                    {
                        world.prefetched.insert((job, i, dataset));
                    }
                }
                Decision::StageIn {
                    job,
                    node,
                    datasets,
                } => {
                    let i = world.node_index(&node).expect("a simulated node");
                    for dataset in datasets {
                        world.ensure(i, &dataset, now, Kind::Stage);
                    }
                    world.staging_in.insert(job, i);
                }
                _ => {}
            }
        }
        world.starting.clear();
        // Staging jobs: their transfers start (room allowing), and they start computing once
        // their data is there.
        let staging: Vec<(u64, u32)> = world
            .life
            .jobs()
            .filter(|(_, l)| l.state == JobState::Staging)
            .map(|(id, l)| (*id, l.attempt))
            .collect();
        for (id, attempt) in staging {
            let (node, _) = world.placed[&JobId(id)];
            let dataset = world.trace[&JobId(id)].dataset.clone();
            world.ensure(node, &dataset, now, Kind::Stage);
            if world.complete(node, &dataset) {
                let event = Event::Staged {
                    job: id,
                    attempt,
                    notes: Vec::new(),
                    next: Readiness::Ready {
                        isolation: "simulated".into(),
                    },
                };
                let effects = world.life.handle(event, now.0);
                apply(&mut world, &mut sched, effects, now, grace_s);
            }
        }

        // The next thing that happens.
        let next = [
            runnable
                .get(next_arrival)
                .map(|j| Timestamp((j.submit_s * 1000.0) as i64)),
            world
                .running
                .values()
                .map(|(_, end)| *end)
                .filter(|end| *end != Timestamp::NEVER)
                .min(),
            world.next_transfer_end(now),
            world.preempt.stopping.values().map(|(_, stop)| *stop).min(),
            // With accounts, a waiting job may preempt once a running job's minimum runtime
            // has passed.
            (!input.accounts.is_empty() && sched.pending().next().is_some())
                .then(|| {
                    world
                        .running
                        .values()
                        .map(|(start, _)| start.plus_secs(min_runtime_s))
                        .filter(|t| *t > now)
                        .min()
                })
                .flatten(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        let next = next.max(Timestamp(now.0 + 1));
        let dt = (next.0 - now.0) as f64 / 1000.0;
        if sched.pending().next().is_some() {
            // Jobs wait: how much of the pool is given out meanwhile.
            let held: usize = sched.running().map(|(_, a)| a.gpu_count()).sum();
            world.preempt.demand_gpu_s += dt * total_gpus as f64;
            world.preempt.held_with_demand_gpu_s += dt * held as f64;
        }
        world.advance(dt, next);
        now = next;
    }
    let unfinished = world.life.len();
    Ok(report::summarise(
        policy.name(),
        &world.records,
        report::Totals {
            rejected: rejected.len(),
            unfinished,
            total_gpus,
            shared_bytes: world.shared_bytes,
            hits: world.hits,
            needs: world.needs,
            preemptions: world.preempt.count,
            lost_gpu_s: world.preempt.lost_gpu_s,
            preempted_held_gpu_s: world.preempt.held_gpu_s,
            demand_gpu_s: world.preempt.demand_gpu_s,
            held_with_demand_gpu_s: world.preempt.held_with_demand_gpu_s,
            copies: world.counts.clone(),
        },
    ))
}

/// Carries out the lifecycle's effects as the daemon's shell does, against the simulated nodes:
/// a launch computes for the job's run time on its node's GPU type, an end frees the GPUs and
/// records the job. Stages need nothing here: the staging loop models the nodes' copies.
fn apply(
    world: &mut World<'_>,
    sched: &mut Scheduler,
    effects: Vec<Effect>,
    now: Timestamp,
    grace_s: u64,
) {
    for e in effects {
        match e {
            Effect::Launch { job, .. } => {
                let id = JobId(job);
                let (node, _) = world.placed[&id];
                let runtime = world.trace[&id]
                    .duration_on(&world.nodes[node].gpu_type)
                    .expect("checked type")
                    - world.preempt.done_s.get(&id).copied().unwrap_or(0.0);
                let runtime = runtime.max(0.0);
                let dataset = world.trace[&id].dataset.clone();
                if world.streamed(&dataset) {
                    // It reads its data from shared storage as it computes (data loaders read
                    // ahead): it ends when both are done, so slow reads lengthen its run.
                    world.streaming.insert(id, runtime);
                    world.running.insert(id, (now, Timestamp::NEVER));
                    world.stream(id, node, &dataset);
                    continue;
                }
                let end = Timestamp(now.0 + (runtime * 1000.0).round() as i64);
                world.running.insert(id, (now, end));
            }
            Effect::Release { job, .. } => {
                let id = JobId(job);
                let Some(l) = world.life.remove(job) else {
                    continue;
                };
                let end = Timestamp(l.end_time.unwrap_or(now.0));
                let limit_ms = sched.job(id).and_then(|spec| match spec.time_limit {
                    TimeLimit::Seconds(s) => Some(s as i64 * 1000),
                    TimeLimit::Unlimited => None,
                });
                // A slice holds its fraction of the card.
                let part = sched
                    .job(id)
                    .and_then(|spec| spec.resources.slice)
                    .map_or(1.0, |s| match s {
                        labpool_scheduler::slice::Slice::Fraction(d) => 1.0 / f64::from(d.max(1)),
                        labpool_scheduler::slice::Slice::Shards(_) => 1.0,
                    });
                sched.finish(id, l.state, end);
                let (node, placed) = world.placed.remove(&id).expect("a placed job");
                let (compute, _) = world.running.remove(&id).expect("a running job");
                let j = world.trace[&id];
                world.preempt.stopping.remove(&id);
                world.stop_stream(id);
                world.records.push(JobRecord {
                    first_placed: world.preempt.first_placed.remove(&id).unwrap_or(placed),
                    within_share: world.preempt.owners.contains(&id),
                    limit_ms,
                    job: j.job_id,
                    node: world.nodes[node].name.clone(),
                    user: j.user.clone(),
                    gpus: j.gpus,
                    part,
                    gpu_type: world.nodes[node].gpu_type.clone(),
                    submit: Timestamp((j.submit_s * 1000.0) as i64),
                    placed,
                    compute,
                    end,
                });
            }
            Effect::HoldChanged { job, hold } => {
                sched.set_hold(JobId(job), hold);
            }
            Effect::Notice { job, .. } => world.preempt.notice(JobId(job), now, grace_s),
            Effect::Requeue { job, .. } => {
                let id = JobId(job);
                let (_, placed) = world.placed.remove(&id).expect("a placed job");
                let compute = world.running.remove(&id).map_or(now, |(c, _)| c);
                world.stop_stream(id);
                let gpus = world.trace[&id].gpus;
                world.preempt.requeued(id, gpus, placed, compute, now);
                sched.requeue(id);
            }
            Effect::Persist { .. }
            | Effect::Stage { .. }
            | Effect::Forget { .. }
            | Effect::Kill { .. }
            | Effect::Adopt { .. }
            | Effect::Dequeue { .. }
            | Effect::Ignored { .. } => {}
            // The simulator's traces have no interactive sessions to suspend.
            Effect::Suspend { .. } | Effect::Restore { .. } => {}
        }
    }
}
