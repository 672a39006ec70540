//! Anyone who can reach a node cannot end a multi-node job through its step port, as the
//! attack was made: 24 connections sending 15 MiB each to the launcher on the gang's second
//! node (inside the job's 200 MiB memory limit it was killed for memory, and the job recorded
//! CANCELLED). The launcher reads nothing past the link's proof, so the job runs on and its
//! `srun` still reaches that node. And when a part does end on its own, the job is recorded as
//! that part ended, naming its node.

use crate::gang::two_nodes;
use crate::pool::{has, read_output, s};
use std::io::Write;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

/// The pid of the step launcher of job `id` of the pool in `dir`.
fn step_host_of(dir: &std::path::Path, id: u64) -> Option<i32> {
    let key = format!("LABPOOL_JOB_KEY={}", dir.display());
    let job = format!("LABPOOL_JOB_ID={id}\0");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let env =
            String::from_utf8_lossy(&std::fs::read(e.path().join("environ")).ok()?).into_owned();
        let first = cmd.split(|b| *b == 0).next()?;
        (first.ends_with(b"step-host") && env.contains(&key) && env.contains(&job)).then_some(pid)
    })
}

#[test]
fn flooding_a_gangs_step_port_ends_nothing_and_a_part_that_ends_is_recorded_as_it_ended() {
    let Some((ns, c)) = two_nodes("flooding_a_gangs_step_port_ends_nothing") else {
        return;
    };
    let work = &c.ctrl.work;
    let script = c.ctrl.script(
        "flood.sh",
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --mem=200M\n\
         #SBATCH -o flood.out\n\
         touch started\nwhile [ ! -e go ]; do sleep 0.1; done\n\
         srun -l sh -c 'echo on=$SLURMD_NODENAME'\n",
    );
    let id = c.ctrl.submit(&[script.to_str().unwrap()]);
    let t0 = Instant::now();
    while !work.join("started").exists() {
        assert!(t0.elapsed() < T, "the gang never started:\n{}", c.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    let job = c.ctrl.job(id);
    let port = job["ports"]["first"].as_u64().unwrap() as u16 + 1;
    // The launcher on nsnode listens: flood it.
    let addr = (ns.ns_ip.clone(), port);
    let t0 = Instant::now();
    while std::net::TcpStream::connect(addr.clone()).is_err() {
        assert!(t0.elapsed() < T, "nothing listens on {addr:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let flood: Vec<_> = (0..24)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                if let Ok(mut s) = std::net::TcpStream::connect(addr) {
                    let chunk = vec![b'x'; 1 << 20];
                    for _ in 0..15 {
                        if s.write_all(&chunk).is_err() {
                            break;
                        }
                    }
                    std::thread::sleep(Duration::from_secs(3));
                }
            })
        })
        .collect();
    for f in flood {
        f.join().unwrap();
    }
    assert_eq!(s(&c.ctrl.job(id), "state"), "RUNNING", "{}", c.logs());
    std::fs::write(work.join("go"), "").unwrap();
    let done = c.ctrl.wait_done(id, T);
    let out = read_output(&work.join("flood.out"));
    assert_eq!(
        s(&done, "state"),
        "COMPLETED",
        "{done:#}\n{out}\n{}",
        c.logs()
    );
    has(&out, &["0: on=hostnode", "1: on=nsnode"]);

    // A part that ends on its own (its launcher killed) ends the job as it ended, by name.
    let _ = std::fs::remove_file(work.join("started"));
    let _ = std::fs::remove_file(work.join("go"));
    let id = c.ctrl.submit(&[script.to_str().unwrap()]);
    let t0 = Instant::now();
    let pid = loop {
        if let Some(pid) = step_host_of(&c.ctrl.dir, id)
            .or_else(|| c.agents.iter().find_map(|a| step_host_of(&a.dir, id)))
        {
            break pid;
        }
        assert!(t0.elapsed() < T, "no step launcher:\n{}", c.logs());
        std::thread::sleep(Duration::from_millis(50));
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let done = c.ctrl.wait_done(id, T);
    assert_eq!(s(&done, "state"), "FAILED", "{done:#}\n{}", c.logs());
    has(
        s(&done, "reason_detail"),
        &[
            "its part on node nsnode ended first (FAILED",
            "killed by signal 9",
        ],
    );
}
