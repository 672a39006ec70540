//! One scheduling pass with 10,000 waiting jobs on 100 nodes of 8 GPUs, half of them busy,
//! with accounts, limits, dependencies, datasets and backfill reservations in play.
//!
//! `cargo bench -p labpool-scheduler --bench pass`. Target: under 50 ms per pass.

use criterion::{Criterion, criterion_group, criterion_main};
use labpool_scheduler::node::{GpuDevice, NodeSpec};
use labpool_scheduler::partition::Partition;
use labpool_scheduler::policy::{Account, Limits};
use labpool_scheduler::{JobId, JobSpec, JobState, Resources, Scheduler, TimeLimit, Timestamp};
use std::hint::black_box;

fn cluster(pending: u64) -> Scheduler {
    let part = |name: &str, default, priority| Partition {
        name: name.into(),
        default,
        priority,
        nodes: None,
        default_time: TimeLimit::Seconds(3600),
        max_time: TimeLimit::Seconds(7 * 86_400),
        allow_accounts: None,
        max_gpus_per_job: None,
        default_slice: None,
    };
    let mut s = Scheduler::new(vec![part("normal", true, 10), part("high", false, 20)]).unwrap();
    for n in 0..100 {
        let ty = ["a100", "v100", "rtx4090", "t4"][n % 4];
        let gpus = (0..8)
            .map(|i| GpuDevice {
                index: i,
                gpu_type: ty.into(),
                product: "bench".into(),
                memory_mib: 0,
                uuid: None,
                share: 1,
                slices: Vec::new(),
                nvlink_peer: None,
            })
            .collect();
        s.upsert_node(NodeSpec {
            name: format!("node{n:03}"),
            gpus,
            cpus: 64,
            mem_mib: 512 * 1024,
            features: vec![],
        })
        .unwrap();
    }
    for a in 0..10 {
        let members = (0..5).map(|u| format!("user{}", a * 5 + u)).collect();
        let limits = Limits {
            grp_gpus: Some(120),
            max_gpus_per_user: Some(32),
            ..Limits::default()
        };
        s.set_account(&format!("group{a}"), Account { members, limits });
    }
    let datasets = ["imagenet", "cifar10", "wikitext2", "ml-20m"];
    let mut id = 0u64;
    let mut make = |i: u64, gpus: u32| {
        id += 1;
        let user = format!("user{}", i % 50);
        JobSpec {
            id: JobId(id),
            name: format!("job{id}"),
            account: Some(format!("group{}", (i % 50) / 5)),
            user,
            partition: if i.is_multiple_of(10) {
                "high".into()
            } else {
                "normal".into()
            },
            resources: Resources {
                nodes: 1,
                gpus,
                gpu_type: if i.is_multiple_of(3) {
                    Some(["a100", "v100", "rtx4090", "t4"][(i % 4) as usize].into())
                } else {
                    None
                },
                cpus: 4,
                mem_mib: 16 * 1024,
                gpu_share: false,
                slice: None,
            },
            time_limit: TimeLimit::Seconds(3600 * (1 + i % 24)),
            submit_time: Timestamp(i as i64 * 1000),
            datasets: vec![datasets[(i % 4) as usize].into()],
            ..JobSpec::default()
        }
    };
    // Fill half the cluster with running jobs, then queue the pending ones.
    for i in 0..400 {
        s.enqueue(make(i, 1));
    }
    s.schedule(Timestamp(0));
    for i in 0..pending {
        s.enqueue(make(i, [1, 1, 2, 4, 8][(i % 5) as usize]));
    }
    s
}

fn pass(c: &mut Criterion) {
    let mut group = c.benchmark_group("schedule");
    group.sample_size(20);
    group.bench_function("10000 pending on 100 nodes", |b| {
        b.iter_batched(
            || cluster(10_000),
            |mut s| black_box(s.schedule(Timestamp(3_600_000))),
            criterion::BatchSize::LargeInput,
        )
    });
    group.bench_function("steady state: second pass, nothing changed", |b| {
        let mut s = cluster(10_000);
        s.schedule(Timestamp(3_600_000));
        b.iter(|| black_box(s.schedule(Timestamp(3_600_000))))
    });
    group.bench_function("a job ends and the pass refills it", |b| {
        let mut s = cluster(10_000);
        s.schedule(Timestamp(3_600_000));
        b.iter(|| {
            let first = s.running().map(|(j, _)| j.id).next().unwrap();
            s.finish(first, JobState::Completed, Timestamp(3_600_000));
            black_box(s.schedule(Timestamp(3_600_000)))
        })
    });
    group.finish();
}

criterion_group!(benches, pass);
criterion_main!(benches);
