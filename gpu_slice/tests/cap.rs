//! The slice library against a fake CUDA driver: real processes, built here with gcc, allocate
//! through the driver the three ways frameworks reach it, with the library preloaded as the
//! agent preloads it.

use labpool_gpu_slice::{Account, environment, install};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The fake driver (as `libcuda.so.1`), the probe program and the installed library, in a
/// temporary directory.
struct Kit {
    dir: tempfile::TempDir,
    library: PathBuf,
}

fn gcc(args: &[&str]) {
    let out = Command::new("gcc")
        .args(args)
        .output()
        .expect("gcc runs (the crate's build needs it too)");
    assert!(
        out.status.success(),
        "gcc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kit() -> Kit {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let here = env!("CARGO_MANIFEST_DIR");
    gcc(&[
        "-shared",
        "-fPIC",
        "-O2",
        "-Wl,-soname,libcuda.so.1",
        "-o",
        &format!("{d}/libcuda.so.1"),
        &format!("{here}/tests/fake/fake_cuda.c"),
    ]);
    std::os::unix::fs::symlink(format!("{d}/libcuda.so.1"), format!("{d}/libcuda.so")).unwrap();
    gcc(&[
        "-O2",
        "-o",
        &format!("{d}/probe"),
        &format!("{here}/tests/fake/probe.c"),
        &format!("-L{d}"),
        "-lcuda",
        "-ldl",
    ]);
    // The e2e tests' fake NVML, two RTX 4090s of 24564 MiB, 1000 MiB used on each.
    gcc(&[
        "-shared",
        "-fPIC",
        "-Wl,-soname,libnvidia-ml.so.1",
        "-o",
        &format!("{d}/libnvidia-ml.so.1"),
        &format!("{here}/../tests/e2e/fake_nvml.c"),
        "-ldl",
    ]);
    std::fs::write(
        dir.path().join("nvml-script.txt"),
        "count 2\nfb 0 24564 1000\nfb 1 24564 1000\n",
    )
    .unwrap();
    let library = install(dir.path()).unwrap();
    Kit { dir, library }
}

impl Kit {
    /// A job's account for a slice of `mib`, in a directory of its own.
    fn job(&self, name: &str, mib: u64) -> Job {
        let d = self.dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        Job {
            account: Account::create(&d, mib).unwrap(),
            mib,
        }
    }

    /// The probe as a process of `job` (none: not sliced).
    fn probe(&self, job: Option<&Job>, args: &[&str]) -> Command {
        let mut c = Command::new(self.dir.path().join("probe"));
        c.args(args)
            .env("LD_LIBRARY_PATH", self.dir.path())
            .env("FAKE_CUDA_TOTAL_MIB", "24576")
            .env_remove("LD_PRELOAD")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(j) = job {
            for (k, v) in environment(&self.library, &j.account, j.mib, 0, None) {
                c.env(k, v);
            }
        }
        c
    }

    fn run(&self, job: Option<&Job>, args: &[&str]) -> Vec<String> {
        let out = self.probe(job, args).output().unwrap();
        assert!(
            out.status.success(),
            "probe {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// A sliced job: its account and its slice's memory, MiB.
struct Job {
    account: PathBuf,
    mib: u64,
}

/// Waits until `child` has printed `lines` lines, and returns them.
fn first_lines(child: &mut Child, lines: usize) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    let out = child.stdout.take().unwrap();
    let mut reader = BufReader::new(out);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < lines && Instant::now() < deadline {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        got.push(line.trim_end().to_string());
    }
    child.stdout = Some(reader.into_inner());
    got
}

#[test]
fn every_way_to_the_driver_is_held_to_the_slice_and_sees_it() {
    let k = kit();
    let quarter = k.job("quarter", 6144);
    for way in ["linked", "dlsym", "procaddr"] {
        let got = k.run(
            Some(&quarter),
            &[
                way, "info", "alloc", "4096", "alloc", "4096", "info", "vmm", "2000", "async",
                "100", "managed", "48", "free", "free", "unvmm", "alloc", "6144", "free",
            ],
        );
        assert_eq!(
            got,
            [
                "info free=6144 total=6144",
                "alloc 4096 ok",
                "alloc 4096 err 2",
                "info free=2048 total=6144",
                "vmm 2000 ok",
                "async 100 err 2",
                "managed 48 ok",
                "free ok",
                "free ok",
                "unvmm ok",
                "alloc 6144 ok",
                "free ok",
            ],
            "{way}"
        );
        // Pitched rows are booked with their padding: 1000-byte rows take 1024 bytes each.
        let got = k.run(
            Some(&quarter),
            &[
                way, "vmm", "5800", "pitch", "1000", "400000", "pitch", "1000", "300000",
            ],
        );
        assert_eq!(
            got,
            ["vmm 5800 ok", "pitch err 2", "pitch ok 1024"],
            "{way}"
        );
        // Without the library the fake card is 24 GiB.
        let got = k.run(None, &[way, "info", "alloc", "8192"]);
        assert_eq!(
            got,
            ["info free=24576 total=24576", "alloc 8192 ok"],
            "{way}"
        );
    }
    // What processes that ended still had booked comes back when a new one needs it.
    assert_eq!(
        k.run(Some(&quarter), &["linked", "alloc", "6144"]),
        ["alloc 6144 ok"]
    );
}

#[test]
fn the_processes_of_one_job_share_its_slice_and_another_job_keeps_its_own() {
    let k = kit();
    let first = k.job("first", 4096);
    let second = k.job("second", 4096);
    let mut holder = k
        .probe(
            Some(&first),
            &["dlsym", "alloc", "3000", "info", "hold", "30"],
        )
        .spawn()
        .unwrap();
    assert_eq!(
        first_lines(&mut holder, 2),
        ["alloc 3000 ok", "info free=1096 total=4096"]
    );
    // A second process of the same job has only what the first left.
    assert_eq!(
        k.run(
            Some(&first),
            &["procaddr", "info", "alloc", "2000", "alloc", "1000", "free"]
        ),
        [
            "info free=1096 total=4096",
            "alloc 2000 err 2",
            "alloc 1000 ok",
            "free ok"
        ]
    );
    // Another job on the same card cannot touch the first job's room, nor it this one's.
    assert_eq!(
        k.run(Some(&second), &["linked", "alloc", "4096"]),
        ["alloc 4096 ok"]
    );
    // A child process is held as its parent is: with 3100 held by the job, the child cannot
    // take 1000 more.
    assert_eq!(
        k.run(
            Some(&first),
            &[
                "linked", "alloc", "100", "child", "dlsym", "alloc", "1000", "alloc", "1"
            ]
        ),
        ["alloc 100 ok", "alloc 1000 err 2", "alloc 1 ok"]
    );
    let usage = Account::read(&first.account).unwrap();
    assert_eq!((usage.used, usage.peak), (3101 << 20, 4000 << 20));
    // What a killed process held comes back to its job at the next allocation that needs it.
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(
        k.run(Some(&first), &["linked", "alloc", "4096", "free"]),
        ["alloc 4096 ok", "free ok"]
    );
    assert_eq!(Account::read(&first.account).unwrap().used, 0);
}

#[test]
fn a_process_that_cannot_map_its_account_is_held_to_the_slice_alone() {
    let k = kit();
    let account = k.job("gone", 1024);
    std::fs::remove_file(&account.account).unwrap();
    let out = k
        .probe(Some(&account), &["linked", "alloc", "1024", "alloc", "1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["alloc 1024 ok", "alloc 1 err 2"]
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("this process alone is held to 1024 MiB"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn nvml_shows_the_slice_as_the_card_and_the_other_cards_as_they_are() {
    let k = kit();
    let quarter = k.job("nvml", 6144);
    // The job's card (NVML index 0) reads as its slice, with what the job holds as used; the
    // card the job does not hold reads as NVML says.
    assert_eq!(
        k.run(
            Some(&quarter),
            &["linked", "alloc", "4096", "nvml", "0", "nvml", "1"]
        ),
        [
            "alloc 4096 ok",
            "nvml 0 total=6144 used=4096 free=2048",
            "nvml 1 total=24564 used=1000 free=23564"
        ]
    );
    assert_eq!(
        k.run(None, &["linked", "nvml", "0"]),
        ["nvml 0 total=24564 used=1000 free=23564"]
    );
}
