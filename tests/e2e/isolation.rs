//! GPU hygiene through the real binary and controller: on fake GPU device nodes (`mknod c
//! 195 N`, as the Slurm testbed does), a job can open only the GPU it was given; `--mem`
//! becomes a memory limit that kills a job exceeding it, with the reason in `show`; and with
//! `gpu_share = 2`, two `--gpu-share` jobs hold one GPU and a third never does.

use crate::pool::{Pool, has, have_root, read_output};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Makes `/dev/nvidiaN`-like nodes (`c 195 N`, mode 0666) in `dir`; without an NVIDIA driver
/// opening one fails with ENXIO, unless the job's cgroup denies it first (EPERM).
fn fake_gpus(dir: &Path, n: u32) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        let path = dir.join(format!("nvidia{i}"));
        nix::sys::stat::mknod(
            &path,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(195, u64::from(i)),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
}

/// The agent names a job's groups FNV-1a(spool jobs dir)-JOB.ATTEMPT, so that pools on one
/// machine never share one.
fn group_name(pool: &Pool, job: u64) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in pool
        .dir
        .join("state/spool/jobs")
        .as_os_str()
        .as_encoded_bytes()
    {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}-{job}.1", h as u32)
}

#[test]
fn a_job_opens_only_its_own_gpu_and_the_record_says_so() {
    if !have_root("a_job_opens_only_its_own_gpu_and_the_record_says_so") {
        return;
    }
    only_its_own_gpu(None, "cgroup v1", "devices");
}

#[test]
fn the_cgroup_v2_bpf_filter_also_keeps_a_job_to_its_own_gpu() {
    if !have_root("the_cgroup_v2_bpf_filter_also_keeps_a_job_to_its_own_gpu") {
        return;
    }
    // This host is hybrid (v1 controllers and a v2 hierarchy): the v1 devices controller is
    // set aside, so only the BPF program on the job's v2 group can refuse the other GPUs.
    only_its_own_gpu(Some("bpf"), "cgroup v2 BPF", "unified");
}

/// Runs two jobs on fake GPUs with `device_filter` (the config's default when `None`); `word`
/// is how the isolation is described, `hierarchy` the name /proc/self/cgroup gives the group's
/// hierarchy.
fn only_its_own_gpu(device_filter: Option<&str>, word: &str, hierarchy: &str) {
    let mut pool = Pool::new("4:t4");
    if let Some(f) = device_filter {
        pool.edit_config(|t| {
            t.replace(
                "isolation = \"auto\"",
                &format!("isolation = \"auto\"\ndevice_filter = \"{f}\""),
            )
        });
    }
    pool.start();
    let nodes = pool.ok(&["nodes"]);
    has(
        &nodes,
        &[
            &format!("isolation: devices ({word})"),
            "memory (cgroup v1)",
        ],
    );
    let devices = pool.dir.join("fakedev");
    fake_gpus(&devices, 4);
    // Each job tries every GPU: ENXIO ("No such device or address") means the cgroup let it
    // through to the (absent) driver; EPERM means the cgroup refused it.
    let script = pool.script(
        "probe.sh",
        &format!(
            "#!/bin/bash\nfor i in 0 1 2 3; do\n  if (exec 3<{}/nvidia$i) 2>/tmp/probe.$$; then echo \"gpu$i open\"; \
             elif grep -q 'not permitted' /tmp/probe.$$; then echo \"gpu$i denied\"; else echo \"gpu$i allowed\"; fi\ndone\n\
             echo \"visible=$CUDA_VISIBLE_DEVICES\"\ncat /proc/self/cgroup\nsleep 1\n",
            devices.display()
        ),
    );
    let a = pool.submit(&[
        "--gpus",
        "1",
        "-o",
        "probe-%j.out",
        script.to_str().unwrap(),
    ]);
    let b = pool.submit(&[
        "--gpus",
        "2",
        "-o",
        "probe-%j.out",
        script.to_str().unwrap(),
    ]);
    for job in [a, b] {
        let done = pool.wait_done(job, Duration::from_secs(30));
        assert_eq!(done["state"], "COMPLETED", "{done}");
        let gpus: Vec<u64> = done["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_u64().unwrap())
            .collect();
        let out = read_output(&pool.work.join(format!("probe-{job}.out")));
        // The job ran in its own group of the hierarchy that filters devices.
        let group = group_name(&pool, job);
        let line = if hierarchy == "unified" {
            format!("0::/labpool/{group}")
        } else {
            format!("{hierarchy}:/labpool/{group}")
        };
        has(&out, &[&line]);
        for i in 0..4u64 {
            let want = if gpus.contains(&i) {
                "allowed"
            } else {
                "denied"
            };
            has(&out, &[&format!("gpu{i} {want}")]);
        }
        let isolation = done["isolation"].as_str().unwrap_or_default();
        has(
            isolation,
            &[&format!(
                "devices ({word}; {} other GPU{} denied)",
                4 - gpus.len(),
                if 4 - gpus.len() == 1 { "" } else { "s" }
            )],
        );
    }
    // Nothing is left of the jobs' cgroups.
    let root = if hierarchy == "unified" {
        "/sys/fs/cgroup/unified/labpool"
    } else {
        "/sys/fs/cgroup/devices/labpool"
    };
    let left: Vec<_> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{root}: {e}"))
        .flatten()
        .map(|e| e.file_name())
        .collect();
    for job in [a, b] {
        let name = group_name(&pool, job);
        assert!(
            !left.iter().any(|n| n.to_string_lossy() == name),
            "{name} left behind: {left:?}"
        );
    }
}

#[test]
fn the_memory_limit_kills_a_job_that_exceeds_it_with_the_reason() {
    if !have_root("the_memory_limit_kills_a_job_that_exceeds_it_with_the_reason") {
        return;
    }
    let mut pool = Pool::new("1:t4");
    pool.start();
    let hog = pool.script(
        "hog.sh",
        "#!/bin/sh\necho start\nexec /usr/bin/python3 -c 'a = bytearray(400 * 1024 * 1024); print(\"survived\")'\n",
    );
    let job = pool.submit(&["--mem", "64M", "-o", "hog-%j.out", hog.to_str().unwrap()]);
    let done = pool.wait_done(job, Duration::from_secs(60));
    assert_eq!(done["state"], "OUT_OF_MEMORY", "{done}");
    has(
        done["reason_detail"].as_str().unwrap_or_default(),
        &["memory", "64M", "--mem"],
    );
    assert!(!read_output(&pool.work.join(format!("hog-{job}.out"))).contains("survived"));
    let shown = pool.ok(&["show", &job.to_string()]);
    has(&shown, &["OUT_OF_MEMORY", "memory 64M (cgroup v1)"]);

    // Under the limit the same job runs.
    let fits = pool.script(
        "fits.sh",
        "#!/bin/sh\nexec /usr/bin/python3 -c 'a = bytearray(16 * 1024 * 1024); print(\"fine\")'\n",
    );
    let job = pool.submit(&["--mem", "256M", "-o", "fits-%j.out", fits.to_str().unwrap()]);
    let done = pool.wait_done(job, Duration::from_secs(60));
    assert_eq!(done["state"], "COMPLETED", "{done}");
}

#[test]
fn gpu_hygiene_variables_follow_the_config_and_the_job() {
    let mut pool = Pool::new("1:t4");
    pool.edit_config(|t| {
        t.replace(
            "[jobs]\n",
            "[jobs]\ngpu_env = { TF_GPU_ALLOCATOR = \"\", XLA_PYTHON_CLIENT_PREALLOCATE = \"true\" }\n",
        )
    });
    pool.start();
    let script = pool.script(
        "env.sh",
        "#!/bin/sh\necho \"alloc=${TF_GPU_ALLOCATOR-unset} xla=$XLA_PYTHON_CLIENT_PREALLOCATE growth=$TF_FORCE_GPU_ALLOW_GROWTH torch=$PYTORCH_CUDA_ALLOC_CONF order=$CUDA_DEVICE_ORDER\"\n",
    );
    let job = pool.submit(&[
        "--gpus",
        "1",
        "-o",
        "env-%j.out",
        "--export",
        "ALL,PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128",
        script.to_str().unwrap(),
    ]);
    let done = pool.wait_done(job, Duration::from_secs(30));
    assert_eq!(done["state"], "COMPLETED", "{done}");
    // Dropped by the config, changed by the config, the default, the job's own, always set.
    has(
        &read_output(&pool.work.join(format!("env-{job}.out"))),
        &["alloc=unset xla=true growth=true torch=max_split_size_mb:128 order=PCI_BUS_ID"],
    );
}

#[test]
fn two_sharing_jobs_hold_one_gpu_and_never_three() {
    let mut pool = Pool::new("1:t4");
    pool.edit_config(|t| t.replace("[node]\n", "[node]\ngpu_share = 2\n"));
    pool.start();
    let script = pool.script(
        "small.sh",
        "#!/bin/sh\necho \"visible=$CUDA_VISIBLE_DEVICES\"\nsleep 4\n",
    );
    let ids: Vec<u64> = (0..3)
        .map(|_| {
            pool.submit(&[
                "--gpus",
                "1",
                "--gpu-share",
                "-o",
                "small-%j.out",
                script.to_str().unwrap(),
            ])
        })
        .collect();
    let whole = pool.submit(&[
        "--gpus",
        "1",
        "-o",
        "whole-%j.out",
        script.to_str().unwrap(),
    ]);
    // Two run at once on GPU 0, the third and the whole-GPU job wait; never three, and the
    // whole-GPU job never beside a sharer, from the first start to the last end.
    let t0 = Instant::now();
    let mut saw_two = false;
    let mut saw_whole = false;
    let mut saw_shares = false;
    while t0.elapsed() < Duration::from_secs(40) {
        let run = pool.running();
        assert!(run.len() <= 2, "more than 2 jobs on one GPU: {run:?}");
        let whole_runs = run.iter().any(|j| j["id"] == whole);
        saw_whole |= whole_runs;
        if whole_runs {
            assert_eq!(
                run.len(),
                1,
                "the whole-GPU job ran beside sharers: {run:?}"
            );
        }
        if run.len() == 2 {
            saw_two = true;
            for j in &run {
                assert_eq!(j["gpus"], serde_json::json!([0]), "{j}");
            }
            // A moment later one may have ended: `nodes` is read on its own.
            saw_shares |= pool.ok(&["nodes"]).contains("(2/2 shares)");
        }
        if pool.queue().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(saw_two, "two sharing jobs never ran together");
    assert!(saw_whole, "the whole-GPU job was never seen running");
    assert!(
        saw_shares,
        "`labpool nodes` never showed the GPU's 2 of 2 shares held"
    );
    for id in &ids {
        let done = pool.wait_done(*id, Duration::from_secs(30));
        assert_eq!(done["state"], "COMPLETED", "{done}");
        assert_eq!(done["gpu_share"], true);
        has(
            &read_output(&pool.work.join(format!("small-{id}.out"))),
            &["visible=0"],
        );
    }
    let done = pool.wait_done(whole, Duration::from_secs(30));
    assert_eq!(done["state"], "COMPLETED", "{done}");

    // A pool without sharing refuses --gpu-share at submit, and it needs GPUs.
    let mut plain = Pool::new("1:t4");
    plain.start();
    let out = plain.cli(&[
        "submit",
        "--gpus",
        "1",
        "--gpu-share",
        script.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    has(&String::from_utf8_lossy(&out.stderr), &["share"]);
    let out = plain.cli(&["submit", "--gpu-share", script.to_str().unwrap()]);
    assert!(!out.status.success());
    has(&String::from_utf8_lossy(&out.stderr), &["--gpus 1"]);
    assert!(plain.queue().is_empty());
}
