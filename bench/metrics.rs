//! GPU monitoring costs: the agent's sampling overhead per GPU per sample, and the time to
//! render the pool's `/metrics` page for 8 nodes x 8 GPUs with 100 running jobs.
//!
//! ```text
//! cargo bench --bench metrics
//! BENCH_RUNS=2000 cargo bench --bench metrics
//! ```
//!
//! Sampling reads 8 GPUs, each with 4 processes, through the agent's own reader
//! (`gpu_sampler::read`) against the scripted fake NVML (`tests/e2e/fake_nvml.c`, built here
//! with gcc and told to read its script once), so what is timed is labpool's side: the NVML
//! calls through nvml-wrapper, and each process's cgroup and environment read from /proc to
//! find its job. A real driver's calls cost more than the fake's; the figure on a real card
//! comes from the device check (docs/benchmarks.md). CPU time is the thread's own
//! (`CLOCK_THREAD_CPUTIME_ID`), not wall time.
//!
//! The page is `labpool_monitor::page::render` over a view of that pool: every GPU's dcgm
//! series, 100 jobs' series, 300 waiting jobs in 3 partitions. That is the work of a scrape;
//! the HTTP exchange on loopback adds a fraction of a millisecond.
//!
//! The peer, dcgm-exporter, needs NVIDIA's DCGM and a GPU, and neither is on this machine: the
//! figures are set against the issue's aims (1% of a core per node at the 5 s interval; a scrape
//! under 50 ms) as ratios instead.

use labpool::agent::gpu_sampler;
use labpool_monitor::page::{NodeLine, PoolView, RunningLine, render};
use labpool_monitor::sample::{GpuProcess, GpuSample, NodeSample};
use labpool_monitor::usage::{JobReading, JobUsage};
use std::collections::BTreeMap;
use std::time::Instant;

#[path = "common.rs"]
mod common;
use common::{env_num, median, require_tools};

/// This thread's CPU time so far, ns (`CLOCK_THREAD_CPUTIME_ID`).
fn cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer to a timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn sampling(runs: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("fake_nvml.c");
    let lib = dir.path().join("libnvidia-ml.so.1");
    std::fs::write(&src, include_str!("../tests/e2e/fake_nvml.c")).unwrap();
    let ok = std::process::Command::new("gcc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success());
    let me = std::process::id();
    let mut script = String::from("count 8\n");
    for g in 0..8 {
        script.push_str(&format!(
            "name {g} NVIDIA A100-SXM4-80GB\nutil {g} 87 40\nfb {g} 81920 60000\ntemp {g} 64\n\
             power {g} 310000\nenergy {g} 123456789\nclock {g} 1410\necc {g} 0 0 3 0\nretired {g} 0 0\n"
        ));
        for p in 0..4 {
            script.push_str(&format!("proc {g} {me} {} {}\n", 10_000 + p, 20 + p));
        }
    }
    std::fs::write(dir.path().join("nvml-script.txt"), script).unwrap();
    // SAFETY: set before any thread that reads the environment is started.
    unsafe { std::env::set_var("LABPOOL_FAKE_NVML_STATIC", "1") };
    let nvml = nvml_wrapper::Nvml::builder()
        .lib_path(lib.as_os_str())
        .init()
        .unwrap();
    let mut since = BTreeMap::new();
    let mut per_gpu_us = Vec::with_capacity(runs);
    let mut wall_us = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (c0, t0) = (cpu_ns(), Instant::now());
        let (sample, s) = gpu_sampler::read(&nvml, since);
        since = s;
        let (c1, t1) = (cpu_ns(), t0.elapsed());
        assert_eq!(sample.gpus.len(), 8);
        assert_eq!(sample.gpus[7].processes.len(), 4);
        per_gpu_us.push((c1 - c0) as f64 / 1000.0 / 8.0);
        wall_us.push(t1.as_secs_f64() * 1e6);
    }
    (median(per_gpu_us), median(wall_us))
}

fn pool_view() -> PoolView {
    let mut view = PoolView {
        now_ms: 1_000_000,
        ..PoolView::default()
    };
    for n in 0..8 {
        let node = format!("gpu{n:02}");
        let gpus = (0..8)
            .map(|g| GpuSample {
                index: g,
                uuid: Some(format!("GPU-{n:02}{g:02}-aaaa-bbbb-cccc")),
                model: "NVIDIA A100-SXM4-80GB".into(),
                minor: Some(g),
                util: Some(80),
                mem_util: Some(40),
                fb_used_mib: Some(60_000),
                fb_free_mib: Some(21_920),
                temp_c: Some(64),
                power_w: Some(310.5),
                energy_mj: Some(123_456_789),
                sm_clock_mhz: Some(1410),
                throttle: Some(0),
                processes: vec![GpuProcess {
                    pid: 1000 + g,
                    used_mib: 60_000,
                    sm_util: Some(80),
                    job: Some(u64::from(n * 8 + g)),
                }],
                ..GpuSample::default()
            })
            .collect();
        view.samples.insert(
            node.clone(),
            (
                NodeSample {
                    at_ms: 999_000,
                    gpus,
                    took_us: 800,
                    jobs_memory: Vec::new(),
                },
                999_500,
            ),
        );
        view.nodes.push(NodeLine {
            name: node,
            gpus: 8,
            held: 8,
            up: true,
            slices: Vec::new(),
        });
    }
    for job in 0..100u64 {
        let node = format!("gpu{:02}", (job % 64) / 8);
        let mut usage = JobUsage::default();
        usage.add(
            0,
            &JobReading {
                util: 80.0,
                mem_mib: 60_000,
                power_w: 310.0,
                processes: 1,
                gpus: 1,
            },
            5.0,
        );
        view.running.push(RunningLine {
            job,
            user: format!("user{}", job % 20),
            partition: "normal".into(),
            gpus: BTreeMap::from([(node, vec![(job % 8) as u32])]),
            usage: Some(usage),
        });
    }
    for p in ["normal", "debug", "long"] {
        view.jobs.insert(("PENDING".into(), p.into()), 100);
        view.jobs.insert(("RUNNING".into(), p.into()), 33);
        view.oldest_wait_ms.insert(p.into(), 3_600_000);
    }
    view.disks = vec![
        ("/var/lib/labpool".into(), 41.0),
        ("/srv/scratch".into(), 77.5),
    ];
    view
}

fn main() {
    require_tools("metrics", &[("gcc", "gcc")]);
    let runs: usize = env_num("BENCH_RUNS", 1000);
    let (per_gpu_us, wall_us) = sampling(runs);
    let interval_s = 5.0;
    let core_percent = per_gpu_us * 8.0 / (interval_s * 1e6) * 100.0;
    println!("sampling, 8 GPUs x 4 processes, {runs} readings (medians):");
    println!("  CPU per GPU per sample   {per_gpu_us:.1} us");
    println!("  wall per 8-GPU reading   {wall_us:.1} us");
    println!(
        "  share of one core at 5 s {core_percent:.4}%  (aim: under 1%; {:.0}x below it)",
        1.0 / core_percent
    );

    let view = pool_view();
    let page = render(&view);
    let mut times = Vec::with_capacity(200);
    for _ in 0..200 {
        let t0 = Instant::now();
        let p = render(&view);
        times.push(t0.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(p.len(), page.len());
    }
    let ms = median(times);
    println!("/metrics for 8 nodes x 8 GPUs, 100 running jobs (median of 200 renders):");
    println!(
        "  {ms:.2} ms, {} lines, {} KiB  (aim: under 50 ms; {:.0}x below it)",
        page.lines().count(),
        page.len() / 1024,
        50.0 / ms
    );
}
