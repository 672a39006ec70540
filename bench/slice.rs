//! `cargo bench --bench slice`: what the GPU slice library costs a program that allocates, on
//! a loop of small allocations each freed at once (1,000,000 by default), against the same
//! program on the fake CUDA driver alone, in one run. The fake and the program are the slice
//! crate's test programs, built here with gcc.
//!
//! Two drivers: the fake as it is (a call costs a few nanoseconds, so the ratio shows the
//! library's whole cost), and the fake entering the kernel once per call (`FAKE_CUDA_SYSCALL`),
//! the floor of a real driver's call, which goes through an ioctl. A real `cuMemAlloc` costs
//! microseconds more than that; the library's cost per call is the figure to carry over.
//! Knobs: `BENCH_RUNS` (default 5), `BENCH_CALLS` (default 1000000).

#[path = "common.rs"]
mod common;

use common::{env_num, median};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn gcc(args: &[&str]) {
    let out = Command::new("gcc").args(args).output().expect("gcc runs");
    assert!(
        out.status.success(),
        "gcc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Seconds for one run of the loop, with the library preloaded when `account` is given.
fn once(dir: &Path, calls: u64, account: Option<&Path>, syscall: bool, way: &str) -> f64 {
    let mut c = Command::new(dir.join("probe"));
    c.args([way, "loop", &calls.to_string()])
        .env("LD_LIBRARY_PATH", dir)
        .env_remove("LD_PRELOAD");
    if syscall {
        c.env("FAKE_CUDA_SYSCALL", "1");
    }
    if let Some(a) = account {
        let library = dir.join(labpool_gpu_slice::LIBRARY_NAME);
        for (k, v) in labpool_gpu_slice::environment(&library, a, 6144, 0, None) {
            c.env(k, v);
        }
    }
    let t = Instant::now();
    let out = c.output().expect("the probe runs");
    let secs = t.elapsed().as_secs_f64();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    secs
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs: usize = env_num("BENCH_RUNS", 5);
    let calls: u64 = env_num("BENCH_CALLS", 1_000_000);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let d = dir.display().to_string();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("gpu_slice/tests/fake");
    gcc(&[
        "-shared",
        "-fPIC",
        "-O2",
        "-Wl,-soname,libcuda.so.1",
        "-o",
        &format!("{d}/libcuda.so.1"),
        &src.join("fake_cuda.c").display().to_string(),
    ]);
    std::os::unix::fs::symlink(format!("{d}/libcuda.so.1"), format!("{d}/libcuda.so")).unwrap();
    gcc(&[
        "-O2",
        "-o",
        &format!("{d}/probe"),
        &src.join("probe.c").display().to_string(),
        &format!("-L{d}"),
        "-lcuda",
        "-ldl",
    ]);
    labpool_gpu_slice::install(dir).unwrap();
    let account = labpool_gpu_slice::Account::create(dir, 6144).unwrap();
    println!(
        "slice library: {calls} allocations of 256 B, each freed at once; median of {runs} runs\n"
    );
    println!(
        "{:<34} {:>12} {:>12} {:>10} {:>14}",
        "driver, way", "alone ns", "sliced ns", "ratio", "added ns/pair"
    );
    for (syscall, way) in [
        (false, "linked"),
        (false, "procaddr"),
        (true, "linked"),
        (true, "procaddr"),
    ] {
        let mut alone = Vec::new();
        let mut sliced = Vec::new();
        for _ in 0..runs {
            alone.push(once(dir, calls, None, syscall, way));
            sliced.push(once(dir, calls, Some(&account), syscall, way));
        }
        let (a, s) = (median(alone), median(sliced));
        let per = |secs: f64| secs * 1e9 / calls as f64;
        let driver = if syscall {
            "fake + one syscall per call"
        } else {
            "fake"
        };
        println!(
            "{:<34} {:>12.1} {:>12.1} {:>9.2}x {:>14.1}",
            format!("{driver}, {way}"),
            per(a),
            per(s),
            s / a,
            per(s) - per(a)
        );
    }
}
