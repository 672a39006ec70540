//! GPU slices through the real binary and controller: two quarter-card jobs share one card of
//! a node whose cards are cut into halves and quarters, each job's processes (its `srun` steps
//! and background children too) allocate through a fake CUDA driver built here with gcc, and
//! each job sees and gets its quarter only, whatever the other holds.

use crate::pool::{Pool, have_tool, read_output};
use labpool_testkit::wait::pid_of;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Builds the fake driver (as `libcuda.so.1`) and the probe program into `dir`, from the
/// slice crate's test sources; None, as `have_tool` decides, without gcc.
pub fn build_fake_cuda(test: &str, dir: &Path) -> Option<()> {
    if !have_tool(test, "gcc") {
        return None;
    }
    std::fs::create_dir_all(dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("gpu_slice/tests/fake");
    let d = dir.display().to_string();
    let gcc = |args: Vec<String>| {
        let out = Command::new("gcc").args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "gcc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    gcc(vec![
        "-shared".into(),
        "-fPIC".into(),
        "-Wl,-soname,libcuda.so.1".into(),
        "-o".into(),
        format!("{d}/libcuda.so.1"),
        src.join("fake_cuda.c").display().to_string(),
    ]);
    std::os::unix::fs::symlink(format!("{d}/libcuda.so.1"), format!("{d}/libcuda.so")).unwrap();
    gcc(vec![
        "-o".into(),
        format!("{d}/probe"),
        src.join("probe.c").display().to_string(),
        format!("-L{d}"),
        "-lcuda".into(),
        "-ldl".into(),
    ]);
    Some(())
}

/// The slice directories in `/tmp`: where `labpool slice-exec` (over Slurm) and the agent (for a
/// job in a container) put a slice's library and account.
pub fn slice_dirs() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("labpool-slice-"))
        .collect()
}

#[test]
fn two_quarter_slices_share_a_card_and_each_is_held_to_its_quarter() {
    let mut pool = Pool::new("2:rtx4090:24G");
    let cuda = pool.dir.join("cuda");
    if build_fake_cuda("two_quarter_slices_share_a_card", &cuda).is_none() {
        return;
    }
    pool.edit_config(|t| t.replace("[node]\n", "[node]\nslices = { rtx4090 = [2, 4] }\n"));
    pool.start();
    let probe = cuda.join("probe");
    // The job's first process holds 6000 MiB of its 6144 in the background while an srun step
    // and a plain child ask for more; a second quarter job on the same card gets a quarter of
    // its own.
    let script = pool.script(
        "quarter.sh",
        &format!(
            "#!/bin/sh\n\
             export LD_LIBRARY_PATH={cuda}\n\
             echo visible=$CUDA_VISIBLE_DEVICES\n\
             {probe} linked info alloc 6000 hold 6 &\n\
             sleep 2\n\
             srun {probe} dlsym info alloc 200 alloc 100\n\
             {probe} procaddr alloc 200\n\
             wait\n",
            cuda = cuda.display(),
            probe = probe.display(),
        ),
    );
    let ids: Vec<u64> = (0..2)
        .map(|_| {
            pool.submit(&[
                "--gres=gpu:rtx4090.4:1",
                "-o",
                "quarter-%j.out",
                script.to_str().unwrap(),
            ])
        })
        .collect();
    // Both run at once, on the same card.
    let t0 = Instant::now();
    let mut both = false;
    while t0.elapsed() < Duration::from_secs(30) && !both {
        let run = pool.running();
        both = run.len() == 2;
        if both {
            let gpus: Vec<&Value> = run.iter().map(|j| &j["gpus"]).collect();
            assert_eq!(gpus[0], gpus[1], "two quarters share one card: {run:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(both, "the two quarter jobs never ran together");
    for id in &ids {
        let job = pool.wait_done(*id, Duration::from_secs(60));
        assert_eq!(job["state"], "COMPLETED", "{job}");
        let out = read_output(&pool.work.join(format!("quarter-{id}.out")));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                "visible=0",
                "info free=6144 total=6144",
                "alloc 6000 ok",
                "info free=144 total=6144",
                "alloc 200 err 2",
                "alloc 100 ok",
                "alloc 200 err 2",
            ],
            "job {id}"
        );
    }
    // Nothing of the slice outlives the jobs: their directories are gone.
    let left: Vec<_> = std::fs::read_dir(pool.dir.join("state/spool/jobs"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A started pool on the fake NVML in `build` (one RTX 4090 of 24564 MiB, cut in halves and
/// quarters of 6141 MiB), sampled every 200 ms, with a slice grace of 2 s and `extra` appended
/// to its config; None without gcc.
fn sliced_nvml_pool(test: &str, build: &Path, extra: &str) -> Option<Pool> {
    crate::nvml::fake_nvml_pool(test, build, "count 1\n", |t| {
        let t = t
            .replace("[node]\n", "[node]\nslices = { rtx4090 = [2, 4] }\n")
            .replace("[jobs]\n", "[jobs]\nslice_grace = \"2s\"\n");
        assert!(t.contains("slice_grace"), "the config has a [jobs] section");
        format!("{t}\n{extra}")
    })
}

#[test]
fn a_job_that_escapes_its_slice_is_warned_then_killed_and_its_neighbour_runs_on() {
    let build = tempfile::tempdir().unwrap();
    let Some(pool) = sliced_nvml_pool("a_job_that_escapes_its_slice", build.path(), "") else {
        return;
    };
    let script = |text: &str| crate::nvml::script(build.path(), text);
    let job = |name: &str| {
        let pidfile = pool.work.join(format!("{name}.pid"));
        let wrap = format!("echo $$ > {}; exec sleep 60", pidfile.display());
        let id = pool.submit(&["--gres=gpu:rtx4090.4:1", "-J", name, "--wrap", &wrap]);
        (id, pid_of(&pidfile))
    };
    let (greedy, greedy_pid) = job("greedy");
    let (modest, modest_pid) = job("modest");
    // The greedy job's process holds 9000 MiB, as one that escaped the library would; the
    // modest one holds its quarter and its context.
    script(&format!(
        "count 1\nfb 0 24564 15600\nproc 0 {greedy_pid} 9000 50\nproc 0 {modest_pid} 6600 50\n"
    ));
    let ended = pool.wait_done(greedy, Duration::from_secs(30));
    assert_eq!(ended["state"], "CANCELLED", "{ended}");
    let events: Vec<(String, String)> = ended["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap_or_default().to_string(),
                e["detail"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let warned = events.iter().position(|(e, _)| e == "SLICE_EXCEEDED");
    let killed = events.iter().position(|(e, _)| e == "SLICE_KILLED");
    assert!(
        warned.is_some() && killed.is_some() && warned < killed,
        "{events:?}"
    );
    let (_, why) = &events[killed.unwrap()];
    assert!(
        why.contains("9000 MiB") && why.contains("slice of 6141 MiB"),
        "{why}"
    );
    // The neighbour, within its slice and context, runs on.
    assert_eq!(pool.job(modest)["state"], "RUNNING");
    let modest_events = pool.job(modest)["events"].to_string();
    assert!(!modest_events.contains("SLICE_"), "{modest_events}");
    pool.ok(&["cancel", &modest.to_string()]);
}

#[test]
fn a_whole_gpu_job_that_used_little_memory_is_told_which_slice_would_hold_it() {
    let build = tempfile::tempdir().unwrap();
    let (relay, mails) = crate::job_mail::smtp_sink();
    let mail = format!(
        "[mail]\nsmtp = \"{relay}\"\nfrom = \"pool@lab.example\"\ndomain = \"lab.example\"\n"
    );
    let Some(pool) = sliced_nvml_pool("a_whole_gpu_job_told_which_slice", build.path(), &mail)
    else {
        return;
    };
    let pidfile = pool.work.join("train.pid");
    let wrap = format!("echo $$ > {}; exec sleep 3", pidfile.display());
    let id = pool.submit(&[
        "--gres=gpu:1",
        "-J",
        "train",
        "--mail-type=END",
        "--wrap",
        &wrap,
    ]);
    let pid = pid_of(&pidfile);
    crate::nvml::script(
        build.path(),
        &format!("count 1\nfb 0 24564 5000\nproc 0 {pid} 5000 90\n"),
    );
    let done = pool.wait_done(id, Duration::from_secs(30));
    assert_eq!(done["state"], "COMPLETED", "{done}");
    // 5000 MiB and a tenth fit a quarter of 6141 MiB.
    let advice = done["advice"].as_str().unwrap_or_default().to_string();
    assert!(
        advice.contains("it peaked at 4.9G") && advice.contains("--gres=gpu:rtx4090.4:1"),
        "{done}"
    );
    let shown = pool.ok(&["show", &id.to_string()]);
    assert!(shown.contains("Advice\n  it peaked at 4.9G"), "{shown}");
    // The end-of-job mail says it too (its body may come quoted-printable).
    let ended = crate::job_mail::wait_mail(&mails, "Ended", &mut Vec::new());
    let body = ended.data.replace("=\r\n", "").replace("=3D", "=");
    assert!(
        body.contains("A smaller slice: it peaked at 4.9G") && body.contains("gpu:rtx4090.4:1"),
        "{body}"
    );
    // The next run of the same name, waiting, is told from the last one.
    let next = pool.submit(&["--gres=gpu:1", "-J", "train", "--hold", "--wrap", "true"]);
    let why = pool.ok(&["why", &next.to_string()]);
    assert!(
        why.contains("advice: your last run of it peaked at 4.9G"),
        "{why}"
    );
    // A run that already asks for a slice is not advised.
    let sliced = pool.submit(&[
        "--gres=gpu:rtx4090.2:1",
        "-J",
        "train",
        "--hold",
        "--wrap",
        "true",
    ]);
    assert!(pool.job(sliced).get("advice").is_none());
    assert!(!pool.ok(&["why", &sliced.to_string()]).contains("advice"));
}
