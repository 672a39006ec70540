//! Stage-in: a job that fits now on a node without its data waits, its GPUs not taken, while
//! the data is copied there; it keeps that node while the copy runs, takes its GPUs once the
//! data is complete, and past the bound takes them and waits on them as before.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::cache_view::CacheView;
use labpool_scheduler::policy::Policy;
use labpool_scheduler::{Decision, JobSpec, Scheduler};
use std::collections::BTreeMap;

/// A cache in which each (node, dataset) is absent, half copied or complete.
#[derive(Default)]
struct Copying(BTreeMap<(String, String), bool>);

impl Copying {
    fn with(mut self, node: &str, dataset: &str, complete: bool) -> Copying {
        self.0.insert((node.into(), dataset.into()), complete);
        self
    }
}

impl CacheView for Copying {
    fn cached_bytes(&self, node: &str, dataset: &str) -> u64 {
        match self.0.get(&(node.to_string(), dataset.to_string())) {
            Some(true) => 10 << 30,
            Some(false) => 5 << 30,
            None => 0,
        }
    }
    fn copy_seconds(&self, node: &str, datasets: &[String]) -> Option<f64> {
        Some(
            datasets
                .iter()
                .map(|d| match self.0.get(&(node.to_string(), d.clone())) {
                    Some(true) => 0.0,
                    Some(false) => 300.0,
                    None => 600.0,
                })
                .sum(),
        )
    }
    fn lacks(&self, node: &str, datasets: &[String]) -> bool {
        datasets
            .iter()
            .any(|d| self.0.get(&(node.to_string(), d.clone())) != Some(&true))
    }
}

fn sched_with(stage_in_wait_s: Option<u64>) -> Scheduler {
    let mut policy = Policy::default();
    policy.placement.stage_in_wait_s = stage_in_wait_s;
    policy.placement.locality_wait_s = None;
    let mut s = Scheduler::with_policy(vec![partition("normal", true, 0, 86_400)], policy).unwrap();
    for n in ["a", "b"] {
        s.upsert_node(node(n, &["t4"; 2], 16)).unwrap();
    }
    s
}

fn reads(id: u64, gpus: u32, limit_s: u64) -> JobSpec {
    JobSpec {
        datasets: vec!["imagenet".into()],
        ..job(id, "u", gpus, limit_s)
    }
}

/// The stage-in decisions among `d`: job, node, datasets.
fn stage_ins(d: &[Decision]) -> Vec<(u64, String, Vec<String>)> {
    d.iter()
        .filter_map(|d| match d {
            Decision::StageIn {
                job,
                node,
                datasets,
            } => Some((job.0, node.clone(), datasets.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_job_waits_without_gpus_while_its_data_is_copied_and_starts_where_it_landed() {
    let mut s = sched_with(Some(86_400));
    // Node b is busy: job 1 fits only on a.
    s.enqueue(job(9, "u", 2, 4 * H));
    s.enqueue(reads(1, 2, H));
    let d = s.schedule_with(at(0.0), &Copying::default());
    assert_eq!(ids(&d), [9]);
    assert_eq!(started(&d)[&9].0, "b");
    let held = stage_ins(&d);
    assert_eq!(held, [(1, "a".to_string(), vec!["imagenet".to_string()])]);
    assert_eq!(code(&s, 1), "BurstBufferStageIn");
    assert!(reason(&s, 1).contains("copied to a"), "{}", reason(&s, 1));
    // Its GPUs are not taken: a job that ends before the copy does (10 minutes) runs there;
    // one that would not, waits.
    s.enqueue(job(2, "u", 2, 300));
    s.enqueue(job(3, "u", 2, H));
    let d = s.schedule_with(at(0.0), &Copying::default());
    assert_eq!(ids(&d), [2], "{d:?}");
    assert_eq!(started(&d)[&2].0, "a");
    end(&mut s, 2, at(0.01));
    // Half copied to a, and b free now: it keeps a while the copy runs.
    end(&mut s, 9, at(0.02));
    s.remove_pending(labpool_scheduler::JobId(3));
    let half = Copying::default().with("a", "imagenet", false);
    let d = s.schedule_with(at(0.05), &half);
    assert!(started(&d).is_empty(), "{d:?}");
    assert_eq!(stage_ins(&d), held);
    // Complete: it starts there, with nothing left to stage.
    let done = Copying::default().with("a", "imagenet", true);
    let d = s.schedule_with(at(0.1), &done);
    assert_eq!(started(&d)[&1].0, "a");
    assert!(
        d.iter()
            .any(|x| matches!(x, Decision::Start { stage, .. } if stage.is_empty()))
    );
    assert!(stage_ins(&d).is_empty());
}

#[test]
fn a_held_job_starts_at_once_where_placement_finds_its_data_complete() {
    let mut s = sched_with(Some(86_400));
    s.enqueue(reads(1, 1, H));
    let d = s.schedule_with(at(0.0), &Copying::default());
    assert_eq!(stage_ins(&d).len(), 1);
    let on = stage_ins(&d)[0].1.clone();
    let other = if on == "a" { "b" } else { "a" };
    // Another node holds it complete (an admin's warm-up, a peer): it starts there.
    let there = Copying::default()
        .with(&on, "imagenet", false)
        .with(other, "imagenet", true);
    let d = s.schedule_with(at(0.05), &there);
    assert_eq!(started(&d)[&1].0, other, "{d:?}");
    assert!(stage_ins(&d).is_empty());
}

#[test]
fn past_the_bound_or_switched_off_the_job_takes_its_gpus_and_stages_on_them() {
    // Switched off: placed at once, its dataset to stage on its GPUs.
    let mut s = sched_with(None);
    s.enqueue(reads(1, 1, H));
    let d = s.schedule_with(at(0.0), &Copying::default());
    assert_eq!(ids(&d), [1]);
    assert!(
        d.iter()
            .any(|x| matches!(x, Decision::Start { stage, .. } if stage == &["imagenet"]))
    );
    assert!(stage_ins(&d).is_empty());
    // A bound of an hour: held at first, placed once an hour has passed with the copy unfinished.
    let mut s = sched_with(Some(3600));
    s.enqueue(reads(1, 1, H));
    let half = Copying::default();
    assert!(started(&s.schedule_with(at(0.0), &half)).is_empty());
    assert!(started(&s.schedule_with(at(0.5), &half)).is_empty());
    let d = s.schedule_with(at(1.0), &half);
    assert_eq!(ids(&d), [1], "{d:?}");
    assert!(stage_ins(&d).is_empty());
}

#[test]
fn gangs_jobs_without_data_and_jobs_whose_data_is_there_are_never_held() {
    let mut s = sched_with(Some(86_400));
    let mut gang = reads(1, 2, H);
    gang.resources.nodes = 2;
    s.enqueue(gang);
    let d = s.schedule_with(at(0.0), &Copying::default());
    assert_eq!(ids(&d), [1], "{d:?}");
    let mut s = sched_with(Some(86_400));
    s.enqueue(job(1, "u", 1, H));
    s.enqueue(reads(2, 1, H));
    let there = Copying::default().with("b", "imagenet", true);
    let d = s.schedule_with(at(0.0), &there);
    assert_eq!(ids(&d), [1, 2]);
    assert_eq!(started(&d)[&2].0, "b");
    assert!(stage_ins(&d).is_empty());
}
