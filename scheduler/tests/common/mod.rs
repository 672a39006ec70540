//! Helpers the scheduler's integration tests share: partitions, nodes and jobs as the tests
//! build them, admission and submission shortcuts, and readers of decisions and reasons.

use labpool_scheduler::admission::AdmitRequest;
use labpool_scheduler::node::{GpuDevice, NodeSpec};
use labpool_scheduler::partition::Partition;
use labpool_scheduler::{
    Decision, JobId, JobSpec, JobState, Resources, Scheduler, TimeLimit, Timestamp,
};
use std::collections::BTreeMap;

pub const H: u64 = 3600;

pub fn partition(name: &str, default: bool, priority: u32, max_s: u64) -> Partition {
    Partition {
        name: name.into(),
        default,
        priority,
        nodes: None,
        default_time: TimeLimit::Seconds(max_s.min(H)),
        max_time: TimeLimit::Seconds(max_s),
        allow_accounts: None,
        max_gpus_per_job: None,
        default_slice: None,
    }
}

pub fn node(name: &str, gpus: &[&str], cpus: u32) -> NodeSpec {
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
                slices: Vec::new(),
                nvlink_peer: None,
            })
            .collect(),
        cpus,
        mem_mib: 64 * 1024,
        features: vec![],
    }
}

/// A node whose GPUs each take up to `share` sharing jobs.
pub fn shared_node(name: &str, gpus: &[&str], share: u32, cpus: u32) -> NodeSpec {
    let mut n = node(name, gpus, cpus);
    for g in &mut n.gpus {
        g.share = share;
    }
    n
}

pub fn sched() -> Scheduler {
    Scheduler::new(vec![
        partition("normal", true, 0, 86_400),
        partition("high", false, 10, H),
    ])
    .unwrap()
}

pub fn res(gpus: u32, ty: Option<&str>) -> Resources {
    Resources {
        nodes: 1,
        gpus,
        gpu_type: ty.map(str::to_string),
        cpus: 1,
        mem_mib: 0,
        gpu_share: false,
        slice: None,
    }
}

/// `gpus` GPUs of any type, shared (`--gpu-share`).
pub fn share_res(gpus: u32) -> Resources {
    Resources {
        gpu_share: true,
        ..res(gpus, None)
    }
}

pub fn req<'a>(user: &'a str, r: &'a Resources) -> AdmitRequest<'a> {
    AdmitRequest {
        user,
        account: None,
        partition: None,
        time_limit: None,
        resources: r,
        nodes: &labpool_scheduler::job::ANY_NODE,
        emergency: false,
        count: 1,
    }
}

/// A job as a test builds it: id, user, GPUs, time limit in seconds.
pub fn job(id: u64, user: &str, gpus: u32, limit_s: u64) -> JobSpec {
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

pub fn submit(s: &mut Scheduler, id: u64, r: Resources, partition: Option<&str>) {
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

pub fn started(d: &[Decision]) -> BTreeMap<u64, (String, Vec<u32>)> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Start {
                job, allocation, ..
            } => Some((job.0, (allocation.node.clone(), allocation.gpus.clone()))),
            _ => None,
        })
        .collect()
}

pub fn ids(d: &[Decision]) -> Vec<u64> {
    started(d).keys().copied().collect()
}

pub fn reason(s: &Scheduler, id: u64) -> String {
    s.pending_reason(JobId(id))
        .unwrap_or_else(|| panic!("job {id} has no reason"))
        .to_string()
}

pub fn code(s: &Scheduler, id: u64) -> String {
    s.pending_reason(JobId(id))
        .unwrap_or_else(|| panic!("job {id} has no reason"))
        .code
        .clone()
}

pub fn at(h: f64) -> Timestamp {
    Timestamp((h * 3_600_000.0) as i64)
}

pub fn end(s: &mut Scheduler, id: u64, when: Timestamp) {
    s.finish(JobId(id), JobState::Completed, when)
        .expect("was running");
}
