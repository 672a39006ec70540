//! Data locality: nodes holding a job's datasets are preferred, data is prefetched ahead of a
//! predicted start (a gang's on each of its predicted nodes), and a job whose data cannot fit
//! waits with CacheFull.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::cache_view::CacheView;
use labpool_scheduler::{Decision, JobId, JobSpec};
use std::collections::BTreeSet;

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

/// The prefetch decisions among `d`: job, node, dataset and expected start.
fn prefetches(d: &[Decision]) -> Vec<(u64, String, String, labpool_scheduler::Timestamp)> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Prefetch {
                job,
                node,
                dataset,
                expected_start,
            } => Some((job.0, node.clone(), dataset.clone(), *expected_start)),
            _ => None,
        })
        .collect()
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
    let prefetch = prefetches(&d);
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
    // Placed at once and staged on its GPUs (no stage-in), to see where placement puts it.
    let mut policy = labpool_scheduler::policy::Policy::default();
    policy.placement.stage_in_wait_s = None;
    let mut s = labpool_scheduler::Scheduler::with_policy(
        vec![
            partition("normal", true, 0, 86_400),
            partition("high", false, 10, H),
        ],
        policy,
    )
    .unwrap();
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

/// A gang waiting for busy nodes gets its datasets staged ahead on each node it is predicted
/// to start on, and only where they are not cached yet.
#[test]
fn a_waiting_gang_has_its_data_prefetched_on_each_of_its_predicted_nodes() {
    let mut s = sched();
    for n in ["a", "b", "c"] {
        s.upsert_node(node(n, &["t4"; 2], 16)).unwrap();
    }
    // b already holds the dataset; a and b free up in a quarter hour, c in four hours.
    let cache = Cached([("b".to_string(), "imagenet".to_string())].into());
    s.enqueue(job(1, "u", 2, H / 4));
    s.enqueue(job(2, "u", 2, H / 4));
    s.enqueue(job(3, "u", 2, 4 * H));
    let d = s.schedule_with(at(0.0), &cache);
    assert_eq!(started(&d).len(), 3, "{d:?}");
    s.enqueue(JobSpec {
        datasets: vec!["imagenet".into()],
        resources: labpool_scheduler::Resources {
            nodes: 2,
            ..res(2, None)
        },
        ..job(4, "u", 2, H)
    });
    let d = s.schedule_with(at(0.0), &cache);
    let prefetch = prefetches(&d);
    assert_eq!(
        prefetch,
        [(4, "a".to_string(), "imagenet".to_string(), at(0.25))],
        "{d:?}"
    );
}
