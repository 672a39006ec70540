//! Slurm's command names: `labpool install-slurm-commands DIR` links sbatch, squeue, scancel,
//! sinfo, scontrol and srun to labpool, and each prints what Slurm prints. Where the Slurm test
//! cluster runs (as root), the same jobs go to both and `squeue -o "%i %u %T %b"` is compared.

use crate::pool::{Pool, has, s};
use crate::slurm_peer::slurm;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

fn run(bin: &Path, name: &str, args: &[&str], pool: &Pool) -> Output {
    Command::new(bin.join(name))
        .args(args)
        .env("LABPOOL_CONFIG", &pool.config)
        .current_dir(&pool.work)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// The same two jobs in one system: one held, one running on a GPU.
fn two_jobs(sbatch: &dyn Fn(&[&str]) -> String) -> (String, String) {
    let held = sbatch(&["--hold", "--mem=1G", "--wrap", "sleep 60"]);
    let running = sbatch(&[
        "-J",
        "trainjob",
        "--gres=gpu:1",
        "--mem=1G",
        "--wrap",
        "sleep 60",
    ]);
    (held, running)
}

#[test]
fn slurm_command_names_print_what_slurm_prints() {
    let mut pool = Pool::new("2:a100");
    pool.start();
    let bin = pool.dir.join("slurm-bin");
    let out = pool.ok(&["install-slurm-commands", bin.to_str().unwrap()]);
    has(&out, &["sbatch ->", "squeue ->", "srun ->"]);

    let sbatch = |args: &[&str]| {
        let out = text(&run(&bin, "sbatch", args, &pool));
        let id = out
            .trim()
            .strip_prefix("Submitted batch job ")
            .unwrap_or_else(|| panic!("{out}"));
        id.to_string()
    };
    let (held, running) = two_jobs(&sbatch);
    pool.wait_for(running.parse().unwrap(), T, |j| s(j, "state") == "RUNNING");

    let default = text(&run(&bin, "squeue", &[], &pool));
    let lines: Vec<&str> = default.lines().collect();
    assert_eq!(
        lines[0],
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
    );
    let me = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap()
        .name;
    let user8: String = me.chars().take(8).collect();
    assert_eq!(
        lines[1],
        format!("{held:>18}    normal     wrap {user8:>8} PD       0:00      1 (JobHeldUser)")
    );
    assert!(
        lines[2].starts_with(&format!("{running:>18}    normal trainjob {user8:>8}  R ")),
        "{default}"
    );
    let ours = text(&run(&bin, "squeue", &["-o", "%i %u %T %b"], &pool));
    assert_eq!(
        ours,
        format!(
            "JOBID USER STATE TRES_PER_NODE\n{held} {me} PENDING N/A\n{running} {me} RUNNING gres:gpu:1\n"
        )
    );
    let only = text(&run(&bin, "squeue", &["-h", "-t", "R", "-o", "%i"], &pool));
    assert_eq!(only.trim(), running);

    // scontrol release, then scancel by name and by state; nothing printed on success.
    assert_eq!(text(&run(&bin, "scontrol", &["release", &held], &pool)), "");
    let job = pool.wait_for(held.parse().unwrap(), T, |j| s(j, "state") == "RUNNING");
    assert_eq!(s(&job, "state"), "RUNNING");
    let show = text(&run(&bin, "scontrol", &["show", "job", &running], &pool));
    has(
        &show,
        &[
            &format!("JobId={running} JobName=trainjob"),
            "JobState=RUNNING",
            "TRES=cpu=1,mem=1G,node=1,gres/gpu=1",
        ],
    );
    assert_eq!(text(&run(&bin, "scancel", &["-n", "trainjob"], &pool)), "");
    assert_eq!(
        text(&run(&bin, "scancel", &["-t", "RUNNING", "-u", &me], &pool)),
        ""
    );
    for id in [&held, &running] {
        assert_eq!(
            s(&pool.wait_done(id.parse().unwrap(), T), "state"),
            "CANCELLED"
        );
    }
    let bad = run(&bin, "scancel", &["99"], &pool);
    assert_eq!(bad.status.code(), Some(1));
    has(
        &String::from_utf8_lossy(&bad.stderr),
        &["scancel: error: Kill job error on job id 99: Invalid job id specified"],
    );

    let info = text(&run(&bin, "sinfo", &[], &pool));
    let first: Vec<&str> = info.lines().collect();
    assert_eq!(
        first[0],
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST"
    );
    assert!(
        first
            .iter()
            .any(|l| l.starts_with("normal*      up 7-00:00:00      1   idle ")),
        "{info}"
    );

    // The same two jobs through the real Slurm: squeue's fields read alike.
    let Some(conf) = slurm("slurm_command_names_print_what_slurm_prints") else {
        return;
    };
    let slurm_run = |name: &str, args: &[&str]| {
        Command::new(name)
            .args(args)
            .env("SLURM_CONF", &conf)
            .current_dir("/tmp")
            .output()
            .unwrap()
    };
    let sb = |args: &[&str]| {
        let out = text(&slurm_run("sbatch", args));
        out.trim()
            .strip_prefix("Submitted batch job ")
            .unwrap()
            .to_string()
    };
    let (h, r) = two_jobs(&sb);
    let wait_running = std::time::Instant::now();
    let theirs = loop {
        let out = text(&slurm_run(
            "squeue",
            &["-j", &format!("{h},{r}"), "-o", "%i %u %T %b"],
        ));
        if out.contains("RUNNING") || wait_running.elapsed() > T {
            break out;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = slurm_run("scancel", &[&h, &r]);
    let theirs = theirs
        .replace(&format!("{h} "), "HELD ")
        .replace(&format!("{r} "), "RUN ");
    let ours = ours
        .replace(&format!("{held} "), "HELD ")
        .replace(&format!("{running} "), "RUN ");
    assert_eq!(ours, theirs, "labpool:\n{ours}\nSlurm:\n{theirs}");
}

#[test]
fn sacct_lists_the_job_its_batch_step_and_its_srun_steps() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let bin = pool.dir.join("slurm-bin");
    pool.ok(&["install-slurm-commands", bin.to_str().unwrap()]);
    pool.script(
        "steps.sh",
        "#!/bin/bash\n#SBATCH -n 2\nsrun -n 2 true\nsrun false\nexit 0\n",
    );
    let id = pool.submit(&["steps.sh"]);
    assert_eq!(s(&pool.wait_done(id, T), "state"), "COMPLETED");
    let out = text(&run(
        &bin,
        "sacct",
        &[
            "-j",
            &id.to_string(),
            "-P",
            "--format=JobID,JobName,State,ExitCode,NTasks",
        ],
        &pool,
    ));
    assert_eq!(
        out,
        format!(
            "JobID|JobName|State|ExitCode|NTasks\n{id}|steps.sh|COMPLETED|0:0|\n{id}.batch|batch|COMPLETED|0:0|1\n{id}.0|true|COMPLETED|0:0|2\n{id}.1|false|FAILED|1:0|2\n"
        )
    );
    let table = text(&run(&bin, "sacct", &["-X"], &pool));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0],
        "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode"
    );
    assert_eq!(
        lines[1],
        "------------ ---------- ---------- ---------- ---------- ---------- --------"
    );
    assert!(
        lines[2].starts_with(&format!("{id:<12}   steps.sh     normal")),
        "{table}"
    );
    assert_eq!(lines.len(), 3, "{table}");
}

/// sacct as submitit and snakemake's executor plugin call it: `-j` repeated (one per job in
/// flight), `--clusters all` and `--name`, `-j` with an array's id (every task), and the
/// `Reason` field.
#[test]
fn sacct_takes_the_calls_slurm_libraries_make() {
    let mut pool = Pool::new("2:a100");
    pool.start();
    let ok = pool.submit(&["-J", "good", "--wrap", "true"]);
    let bad = pool.submit(&["-J", "bad", "--wrap", "false"]);
    let array = pool.submit(&["-J", "sweep", "--array=0-2", "--wrap", "true"]);
    for id in [ok, bad] {
        pool.wait_done(id, T);
    }
    let t0 = std::time::Instant::now();
    while pool
        .history()
        .iter()
        .filter(|j| j["array_id"] == array)
        .count()
        < 3
    {
        assert!(t0.elapsed() < T, "the array's tasks did not end");
        std::thread::sleep(Duration::from_millis(100));
    }
    let sacct = |args: &[&str]| pool.slurm("sacct", args).trim_end().to_string();
    // One -j per job, as submitit writes it.
    let out = sacct(&[
        "-o",
        "JobID,State",
        "--parsable2",
        "-n",
        "-X",
        "-j",
        &ok.to_string(),
        "-j",
        &bad.to_string(),
    ]);
    assert_eq!(out, format!("{ok}|COMPLETED\n{bad}|FAILED"));
    // An array's id lists every task.
    let out = sacct(&[
        "-X",
        "-P",
        "-n",
        "--format=JobID,State",
        "-j",
        &array.to_string(),
    ]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            format!("{array}_0|COMPLETED"),
            format!("{array}_1|COMPLETED"),
            format!("{array}_2|COMPLETED")
        ],
        "{out}"
    );
    // snakemake's executor plugin: every cluster, by name, over a time window.
    let out = sacct(&[
        "-X",
        "--parsable2",
        "--clusters",
        "all",
        "--noheader",
        "--format=JobIdRaw,State",
        "--starttime",
        "now-1hours",
        "--endtime",
        "now",
        "--name",
        "bad",
    ]);
    assert_eq!(out, format!("{bad}|FAILED"));
    let out = sacct(&[
        "-X",
        "-P",
        "-n",
        "--format=JobID,Reason",
        "-j",
        &ok.to_string(),
    ]);
    assert_eq!(out, format!("{ok}|None"));
}

/// `sbatch` with no file reads the script from standard input (sbatch(1)), naming the job
/// `sbatch`; a member may throw output away with `-o /dev/null`.
#[test]
fn sbatch_reads_a_piped_script_and_output_may_go_to_dev_null() {
    if !crate::pool::have_root("sbatch_reads_a_piped_script") {
        return;
    }
    let (uid, gid) = crate::pool::ensure_user("lp-alice");
    let mut pool = Pool::new("1:a100").for_users();
    pool.start();
    let bin = pool.dir.join("slurm-bin");
    pool.ok(&["install-slurm-commands", bin.to_str().unwrap()]);
    let mut child = Command::new(bin.join("sbatch"))
        .env("LABPOOL_CONFIG", &pool.config)
        .current_dir(&pool.work)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"#!/bin/bash\n#SBATCH -o piped.out\necho from-stdin\n")
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let id: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .strip_prefix("Submitted batch job ")
        .unwrap()
        .parse()
        .unwrap();
    let job = pool.wait_done(id, T);
    assert_eq!((s(&job, "state"), s(&job, "name")), ("COMPLETED", "sbatch"));
    assert_eq!(
        crate::pool::read_output(&pool.work.join("piped.out")),
        "from-stdin\n"
    );
    // A member's output thrown away: accepted, and the job runs.
    let out = pool.cli_as(
        uid,
        gid,
        &[
            "submit",
            "--parsable",
            "-o",
            "/dev/null",
            "--wrap",
            "echo gone",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_eq!(s(&pool.wait_done(id, T), "state"), "COMPLETED");
}

/// A job that ended a moment ago is still in `squeue -t all`, for Slurm's MinJobAge, which
/// `scontrol show config` gives; a plain `squeue` no longer shows it.
#[test]
fn squeue_keeps_an_ended_job_for_min_job_age_and_scontrol_says_how_long() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let id = pool.submit(&["--wrap", "true"]);
    pool.wait_done(id, T);
    let all = pool.slurm("squeue", &["-t", "all", "-h", "-o", "%i %T"]);
    assert!(all.lines().any(|l| l == format!("{id} COMPLETED")), "{all}");
    let done = pool.slurm("squeue", &["--states=CD", "-h", "-o", "%i"]);
    assert!(done.lines().any(|l| l == id.to_string()), "{done}");
    let plain = pool.slurm("squeue", &["-h", "-o", "%i"]);
    assert!(!plain.lines().any(|l| l == id.to_string()), "{plain}");
    let config = pool.slurm("scontrol", &["show", "config"]);
    assert!(
        config
            .lines()
            .any(|l| l == "MinJobAge               = 300 sec"),
        "{config}"
    );
}

/// A job that requeues itself (`scontrol requeue $SLURM_JOB_ID`, submitit's checkpoint) is
/// stopped with SIGTERM while its scontrol may still be waiting for the answer; scontrol must
/// still hear it and exit 0, as Slurm's has exited before slurmd signals the job. A controller
/// stand-in on the socket takes the request, the test sends the SIGTERM, then it answers.
#[test]
fn scontrol_requeue_of_its_own_job_outlives_the_stop_signal() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("labpool.sock");
    let config = dir.path().join("labpool.toml");
    std::fs::write(&config, "[controller]\nsocket = \"labpool.sock\"\n").unwrap();
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let scontrol = dir.path().join("scontrol");
    std::os::unix::fs::symlink(crate::pool::bin(), &scontrol).unwrap();
    let child = std::process::Command::new(&scontrol)
        .args(["requeue", "7"])
        .env("LABPOOL_CONFIG", &config)
        .env("SLURM_JOB_ID", "7")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut conn, _) = listener.accept().unwrap();
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&request).contains("\"ids\"") {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "scontrol closed before its request");
        request.extend_from_slice(&buf[..n]);
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let body = r#"[{"id":"7","ok":true,"message":"requeued"}]"#;
    let _ = write!(
        conn,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
