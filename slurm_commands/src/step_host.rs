//! The step launcher on a gang's other nodes (`labpool-step-host`, started by the shim in
//! place of the script): it runs the tasks `srun` on the batch node sends it, as the job's
//! user, inside the job's cgroup, with this node's GPUs, and streams their output and exit
//! codes back. See [`crate::api::gang`] for the protocol and who may use it.

use crate::api::gang::{Gang, StepFrame, StepRequest, TaskEnv};
use crate::env_vars::{LABPOOL_GANG, LABPOOL_PORTS};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};

/// The variables that name this node's own share of the job: they win over `srun`'s.
const NODE_VARS: [&str; 14] = [
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "SLURMD_NODENAME",
    "SLURM_JOB_GPUS",
    "SLURM_GPUS_ON_NODE",
    "SLURM_CPUS_ON_NODE",
    "SLURM_TOPOLOGY_ADDR",
    crate::env_vars::LABPOOL_GPUS,
    crate::env_vars::LABPOOL_NODE,
    crate::env_vars::LABPOOL_JOB_KEY,
    crate::env_vars::LABPOOL_STEPS,
    crate::env_vars::LABPOOL_GANG,
    crate::env_vars::LABPOOL_HOSTFILE,
    "TMPDIR",
];

/// The prefix of the variables that name a job's datasets on its node.
const DATASET_VARS: &str = "LABPOOL_DATASET";

/// Largest request taken, once the client proved the gang's secret: the environment and the
/// task list.
const MAX_REQUEST: u64 = 16 << 20;

/// How long a client that proved the secret has to send its request.
const REQUEST_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Most connections served at once (a step's `srun` opens one per node); more are closed at
/// once, so that no one who merely reaches the port can make the launcher hold more.
const MAX_CONNECTIONS: usize = 16;

/// Serves steps until the shim stops it with the job.
pub fn main() -> ExitCode {
    match serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("labpool-step-host: {e}");
            ExitCode::from(1)
        }
    }
}

fn serve() -> Result<(), String> {
    let path = std::env::var(LABPOOL_GANG).map_err(|_| format!("{LABPOOL_GANG} is not set"))?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let gang: Gang = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let port = step_port()?;
    // The node's own address, as the gang's other nodes know it: nothing listens for the job
    // on the node's other networks.
    let addr = gang
        .nodes
        .get(gang.index as usize)
        .map(|n| n.host.clone())
        .ok_or_else(|| format!("{path}: node {} is not in the gang", gang.index))?;
    // The previous attempt's launcher may still be stopping on this node, on the same port.
    let started = std::time::Instant::now();
    let listener = loop {
        match TcpListener::bind((addr.as_str(), port)) {
            Ok(l) => break l,
            Err(e) if started.elapsed() < std::time::Duration::from_secs(20) => {
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(e) => {
                return Err(format!(
                    "cannot listen on the job's step port {addr}:{port}: {e}; keep the ports under [jobs] free of other services"
                ));
            }
        }
    };
    eprintln!(
        "labpool-step-host: node {} of job {} takes steps on port {port}",
        gang.index,
        std::env::var(crate::env_vars::LABPOOL_JOB_ID).unwrap_or_default()
    );
    let secret = Arc::new(gang.secret);
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        use std::sync::atomic::Ordering::SeqCst;
        if open.fetch_add(1, SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, SeqCst);
            drop(conn);
            continue;
        }
        let (secret, open) = (secret.clone(), open.clone());
        std::thread::spawn(move || {
            if let Err(e) = handle(conn, &secret) {
                eprintln!("labpool-step-host: {e}");
            }
            open.fetch_sub(1, SeqCst);
        });
    }
    Ok(())
}

/// The launcher's port: the job's second leased port.
pub fn step_port() -> Result<u16, String> {
    let ports = std::env::var(LABPOOL_PORTS).map_err(|_| format!("{LABPOOL_PORTS} is not set"))?;
    crate::session::conn::session_port(&ports)
        .ok_or_else(|| format!("{LABPOOL_PORTS}={ports} is not FIRST-LAST"))
}

fn send(out: &Mutex<TcpStream>, frame: &StepFrame) {
    let mut line = serde_json::to_string(frame).expect("frames serialise");
    line.push('\n');
    let _ = out.lock().expect("not poisoned").write_all(line.as_bytes());
}

fn handle(conn: TcpStream, secret: &str) -> Result<(), String> {
    let peer = conn.peer_addr().map_err(|e| e.to_string())?;
    // The secret first, with a small bound and a deadline: nothing else is read from a client
    // that cannot prove it.
    if let Err(e) = crate::link_auth::host(&conn, secret) {
        return Err(format!("{peer}: refused ({e})"));
    }
    let out = Arc::new(Mutex::new(conn.try_clone().map_err(|e| e.to_string())?));
    conn.set_read_timeout(Some(REQUEST_WITHIN))
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(
        conn.try_clone()
            .map_err(|e| e.to_string())?
            .take(MAX_REQUEST),
    );
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| e.to_string())?;
    conn.set_read_timeout(None).map_err(|e| e.to_string())?;
    let req: StepRequest = match serde_json::from_str(&line) {
        Ok(r) => r,
        Err(e) => {
            send(
                &out,
                &StepFrame::Refused {
                    why: format!("not a step request: {e}"),
                },
            );
            return Err(format!("{peer}: not a step request"));
        }
    };
    let Some(program) = req.argv.first() else {
        send(
            &out,
            &StepFrame::Refused {
                why: "no command".into(),
            },
        );
        return Ok(());
    };
    let env = node_env(&req.env);
    let mut children = Vec::new();
    let mut relays = Vec::new();
    for task in &req.tasks {
        let mut cmd = Command::new(program);
        cmd.args(&req.argv[1..])
            .current_dir(&req.cwd)
            .env_clear()
            .envs(&env)
            .envs(&task.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        set_gpus(&mut cmd, task);
        match cmd.spawn() {
            Ok(mut child) => {
                for (stream, is_err) in [
                    (
                        child
                            .stdout
                            .take()
                            .map(|s| Box::new(s) as Box<dyn Read + Send>),
                        false,
                    ),
                    (
                        child
                            .stderr
                            .take()
                            .map(|s| Box::new(s) as Box<dyn Read + Send>),
                        true,
                    ),
                ] {
                    if let Some(s) = stream {
                        relays.push(relay(s, task.rank, is_err, out.clone()));
                    }
                }
                children.push((task.rank, child));
            }
            Err(e) => {
                let why = format!("cannot run {program} on this node: {e}");
                send(
                    &out,
                    &StepFrame::Err {
                        rank: task.rank,
                        line: why,
                    },
                );
                children.push((task.rank, spawn_failed()));
            }
        }
    }
    // `srun` gone (killed, or its node lost): the tasks still running are stopped. Only
    // this thread reaps them, so a pid is never signalled after it was reaped.
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = gone.clone();
    std::thread::spawn(move || {
        let mut sink = [0u8; 256];
        while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let mut codes = Vec::new();
    while !children.is_empty() {
        let mut left = Vec::new();
        for (rank, mut child) in children {
            match child.try_wait().map_err(|e| e.to_string())? {
                Some(status) => {
                    let code = status
                        .code()
                        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
                    codes.push((rank, code, status.signal()));
                }
                None => {
                    if gone.load(std::sync::atomic::Ordering::SeqCst) {
                        let _ = child.kill();
                    }
                    left.push((rank, child));
                }
            }
        }
        children = left;
        if !children.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    codes.sort_unstable();
    for r in relays {
        let _ = r.join();
    }
    send(&out, &StepFrame::Exit { codes });
    Ok(())
}

/// `srun`'s environment with this node's own variables over it, and this node's commands
/// first on `PATH`.
fn node_env(from: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env = from.clone();
    // Datasets: this node's own copies (`LABPOOL_DATASETS`, `LABPOOL_DATASET_<NAME>`).
    env.retain(|k, _| !k.starts_with(DATASET_VARS));
    env.extend(std::env::vars().filter(|(k, _)| k.starts_with(DATASET_VARS)));
    for k in NODE_VARS {
        match std::env::var(k) {
            Ok(v) => env.insert(k.to_string(), v),
            Err(_) => env.remove(k),
        };
    }
    if let Ok(path) = std::env::var("PATH")
        && let Some(bin) = path.split(':').next()
    {
        let theirs = env.get("PATH").cloned().unwrap_or_default();
        env.insert("PATH".into(), format!("{bin}:{theirs}"));
    }
    env
}

/// A task's own GPUs with `--gpus-per-task`.
fn set_gpus(cmd: &mut Command, task: &TaskEnv) {
    if let Some(g) = &task.gpus {
        let list = g.join(",");
        cmd.env("CUDA_VISIBLE_DEVICES", &list)
            .env("SLURM_STEP_GPUS", &list);
    }
}

/// A child that exits 127 at once, standing for a task that could not start.
fn spawn_failed() -> std::process::Child {
    Command::new("/bin/sh")
        .args(["-c", "exit 127"])
        .spawn()
        .expect("/bin/sh runs")
}

fn relay(
    stream: Box<dyn Read + Send>,
    rank: u32,
    is_err: bool,
    out: Arc<Mutex<TcpStream>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let frame = if is_err {
                StepFrame::Err { rank, line }
            } else {
                StepFrame::Out { rank, line }
            };
            send(&out, &frame);
        }
    })
}
