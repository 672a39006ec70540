//! `srun` inside a job: a step of `--ntasks` tasks over the job's allocation, each with Slurm's
//! per-task variables (`SLURM_PROCID`, `SLURM_LOCALID`, `SLURM_NODEID`, `SLURM_STEP_ID`) and,
//! with `--gpus-per-task`, only its own GPUs. The step is recorded in the job's steps file, so
//! that `labpool show` lists it with its exit code. It needs no Slurm on the node.
//!
//! Tasks on the job's own node run here; on a multi-node job's other nodes, each node's step
//! launcher runs them (see [`crate::api::gang`]), and their output comes back here. A step
//! asking for more nodes than the job has is refused with the reason.

use super::args::parse_srun;
use super::step_output::{StepOutput, TaskPlace};
use super::step_plan::{StepAsk, plan};
use super::step_remote;
use crate::api::gang::{Gang, StepRequest, TaskEnv};
use crate::api::steps::StepRecord;
use crate::env_vars::{
    LABPOOL_GANG, LABPOOL_GPUS, LABPOOL_JOB_ID, LABPOOL_NODE, LABPOOL_PORTS, LABPOOL_STEPS,
};
use clap::Parser;
use labpool_scheduler::hostlist::compress;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

/// Runs `srun ARGS`; the exit code is the highest of its tasks', as srun's.
pub fn main(args: &[String]) -> ExitCode {
    // Before the command: srun's own --version and --usage.
    if let Some(text) = args
        .first()
        .and_then(|w| super::compat::version_or_usage("srun", std::slice::from_ref(w)))
    {
        crate::out!("{text}");
        return ExitCode::SUCCESS;
    }
    match run(args) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("srun: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &[String]) -> Result<i32, String> {
    let a = parse_srun(args)?;
    let var = |k: &str| std::env::var(k).ok();
    let Some(job) = var(LABPOOL_JOB_ID) else {
        if a.pty {
            // `srun --pty bash` from a login shell: an interactive session.
            let mut argv = vec!["labpool".to_string(), "run".to_string()];
            argv.extend(args.iter().cloned());
            let cli = crate::cli::Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
            crate::commands::dispatch(cli, &crate::Names).map_err(|e| format!("{e:#}"))?;
            return Ok(0);
        }
        // Outside a job: an allocation for this one step, as Slurm's srun makes.
        return super::srun_alloc::run(args);
    };
    if !a.ignored.is_empty() {
        eprintln!(
            "srun: warning: {} ignored: the step runs on the job's own cores and GPUs",
            a.ignored.join(", ")
        );
    }
    let node = var(LABPOOL_NODE).unwrap_or_default();
    let gang: Option<Gang> = match var(LABPOOL_GANG) {
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
            Some(serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?)
        }
        None => None,
    };
    let names: Vec<String> = match &gang {
        Some(g) => g.nodes.iter().map(|n| n.name.clone()).collect(),
        None => vec![node.clone()],
    };
    let here = gang.as_ref().map_or(0, |g| g.index as usize);
    let plan = plan(
        names.len(),
        StepAsk {
            ntasks: a.ntasks,
            nodes: a.nodes,
            per_node: a.ntasks_per_node,
            job_ntasks: var("SLURM_NTASKS")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1),
            // Slurm 22.05's srun takes the job's -c from SLURM_CPUS_PER_TASK, which Slurm sets
            // only when -c was given; labpool sets it for every job (its cores over its
            // tasks), so here a step's -c is 1 unless srun gives its own.
            cpus_per_task: a.cpus_per_task,
            job_cpus_per_node: var("SLURM_CPUS_ON_NODE")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            overcommit: a.overcommit,
        },
    )
    .map_err(|e| format!("{e} (job {job} runs on {})", compress(&names)))?;
    let ntasks = plan.ntasks;
    let node_gpus = |i: usize| -> Vec<String> {
        match &gang {
            Some(g) if i != here => g.nodes[i].gpus.iter().map(u32::to_string).collect(),
            _ => var(LABPOOL_GPUS)
                .unwrap_or_default()
                .split(',')
                .filter(|g| !g.is_empty())
                .map(str::to_string)
                .collect(),
        }
    };
    // As in Slurm, a step takes the job's --gpus-per-task unless it gives its own.
    let gpus_per_task = a
        .gpus_per_task
        .or_else(|| var("SLURM_GPUS_PER_TASK").and_then(|g| g.parse().ok()));
    let mut per_task: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (i, ranks) in &plan.nodes {
        if let Some(split) = gpu_share(gpus_per_task, ranks.len() as u32, &node_gpus(*i))
            .map_err(|e| format!("on node {}: {e}", names[*i]))?
        {
            per_task.extend(ranks.iter().copied().zip(split));
        }
    }
    let steps = var(LABPOOL_STEPS);
    let step = match &steps {
        Some(path) => next_step_id(Path::new(path)).map_err(|e| format!("{path}: {e}"))?,
        None => 0,
    };
    let ports = var(LABPOOL_PORTS).and_then(|p| p.split('-').next()?.parse::<u16>().ok());
    let mut task_env = plan.task_env(step, &names, gang.as_ref(), ports);
    let label = a.label.then(|| (ntasks - 1).to_string().len());
    let output = std::sync::Arc::new(StepOutput::new(
        a.output.as_deref(),
        a.error.as_deref(),
        a.open_mode.as_deref(),
        job.parse().unwrap_or(0),
        step,
        &var,
    ));
    let start_ms = crate::clock::now_ms();
    let mut record = StepRecord {
        step,
        name: a
            .command
            .iter()
            .take(2)
            .cloned()
            .collect::<Vec<_>>()
            .join(" "),
        tasks: ntasks,
        nodes: plan.nodes.iter().map(|(i, _)| names[*i].clone()).collect(),
        start_ms,
        end_ms: 0,
        exit_code: 0,
        signal: None,
    };
    if let Some(path) = &steps {
        // Running, until the line that ends it (sacct lists it meanwhile).
        append_step(Path::new(path), &record).map_err(|e| format!("{path}: {e}"))?;
    }
    let mut remote = Vec::new();
    let mut children = Vec::new();
    for (i, ranks) in &plan.nodes {
        if *i != here {
            let g = gang.as_ref().expect("other nodes only in a gang");
            let request = StepRequest {
                step,
                argv: a.command.clone(),
                cwd: std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_else(|_| "/".into()),
                env: std::env::vars().collect(),
                tasks: ranks
                    .iter()
                    .map(|r| TaskEnv {
                        rank: *r,
                        env: task_env.remove(r).unwrap_or_default(),
                        gpus: per_task.get(r).cloned(),
                    })
                    .collect(),
            };
            let (name, host) = (g.nodes[*i].name.clone(), g.nodes[*i].host.clone());
            let port = ports.ok_or("the job has no leased ports to reach its other nodes on")? + 1;
            let secret = g.secret.clone();
            let (output, node_index) = (output.clone(), *i as u32);
            remote.push(std::thread::spawn(move || {
                let at = step_remote::Launcher {
                    node: &name,
                    host: &host,
                    port,
                    secret: &secret,
                    node_index,
                };
                step_remote::run(&at, &request, label, &output)
            }));
            continue;
        }
        for rank in ranks {
            let mut cmd = Command::new(&a.command[0]);
            cmd.args(&a.command[1..])
                .envs(task_env.remove(rank).unwrap_or_default());
            if let Some(mine) = per_task.get(rank).map(|p| p.join(",")) {
                cmd.env("CUDA_VISIBLE_DEVICES", &mine)
                    .env("SLURM_STEP_GPUS", &mine);
            }
            let place = TaskPlace {
                rank: *rank,
                node_index: *i as u32,
                node: &names[*i],
            };
            let files = output.files(place)?;
            // A stream through srun is relayed when it is labelled, else inherited.
            let relayed = |file: &Option<std::fs::File>| file.is_none() && a.label;
            let (relay_out, relay_err) = (relayed(&files.out), relayed(&files.err));
            match files.out {
                Some(f) => cmd.stdout(f),
                None if relay_out => cmd.stdout(Stdio::piped()),
                None => cmd.stdout(Stdio::inherit()),
            };
            match files.err {
                Some(f) => cmd.stderr(f),
                None if relay_err => cmd.stderr(Stdio::piped()),
                None => cmd.stderr(Stdio::inherit()),
            };
            let mut child = cmd
                .spawn()
                .map_err(|e| format!("cannot run {}: {e}", a.command[0]))?;
            let mut relays = Vec::new();
            let node = names[*i].clone();
            let mut relay_stream = |stream: Option<Box<dyn std::io::Read + Send>>, err: bool| {
                if let Some(s) = stream {
                    relays.push(relay(
                        s,
                        output.clone(),
                        (*rank, *i as u32, node.clone()),
                        label,
                        err,
                    ));
                }
            };
            relay_stream(child.stdout.take().map(|s| Box::new(s) as _), false);
            relay_stream(child.stderr.take().map(|s| Box::new(s) as _), true);
            children.push((child, relays));
        }
    }
    let (mut worst, mut signal) = (0, None);
    for (mut child, relays) in children {
        let status = child.wait().map_err(|e| e.to_string())?;
        for r in relays {
            let _ = r.join();
        }
        let code = match (status.code(), status.signal()) {
            (Some(c), _) => c,
            (None, Some(s)) => {
                signal.get_or_insert(s);
                128 + s
            }
            (None, None) => 1,
        };
        worst = worst.max(code);
    }
    for r in remote {
        match r
            .join()
            .map_err(|_| "a remote step thread panicked".to_string())?
        {
            Ok(codes) => {
                for (_, code, sig) in codes {
                    worst = worst.max(code);
                    if let Some(s) = sig {
                        signal.get_or_insert(s);
                    }
                }
            }
            Err(e) => {
                eprintln!("srun: error: {e}");
                worst = worst.max(1);
            }
        }
    }
    if let Some(path) = steps {
        record.end_ms = crate::clock::now_ms().max(start_ms + 1);
        record.exit_code = worst;
        record.signal = signal;
        append_step(Path::new(&path), &record).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(worst)
}

/// Each task's GPUs with `--gpus-per-task`, in rank order; `None` when every task sees all.
fn gpu_share(
    per_task: Option<u32>,
    ntasks: u32,
    gpus: &[String],
) -> Result<Option<Vec<Vec<String>>>, String> {
    let Some(g) = per_task.filter(|g| *g > 0) else {
        return Ok(None);
    };
    let need = (g * ntasks) as usize;
    if need > gpus.len() {
        return Err(format!(
            "--gpus-per-task={g} with {ntasks} tasks needs {need} GPUs; the job has {} ({})",
            gpus.len(),
            if gpus.is_empty() {
                "none".to_string()
            } else {
                gpus.join(",")
            }
        ));
    }
    Ok(Some(
        gpus.chunks(g as usize)
            .take(ntasks as usize)
            .map(<[String]>::to_vec)
            .collect(),
    ))
}

/// Copies a task's output line by line to where it goes, each prefixed with its rank (`-l`).
fn relay(
    stream: Box<dyn std::io::Read + Send>,
    output: std::sync::Arc<StepOutput>,
    (rank, node_index, node): (u32, u32, String),
    label: Option<usize>,
    to_stderr: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let at = TaskPlace {
            rank,
            node_index,
            node: &node,
        };
        for line in std::io::BufReader::new(stream)
            .lines()
            .map_while(Result::ok)
        {
            output.line(to_stderr, at, &line, label);
        }
    })
}

/// Takes the next step id from `PATH.next` under a lock, so that steps started together
/// (`srun a & srun b & wait`) get different ids.
fn next_step_id(steps: &Path) -> std::io::Result<u32> {
    let counter = steps.with_extension("next");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&counter)?;
    let mut lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| std::io::Error::from(e))?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut *lock, &mut text)?;
    let id: u32 = text.trim().parse().unwrap_or(0);
    std::io::Seek::rewind(&mut *lock)?;
    lock.set_len(0)?;
    write!(lock, "{}", id + 1)?;
    Ok(id)
}

/// Appends one record as a line; a line is written in one `write`, so concurrent steps do not
/// interleave.
fn append_step(steps: &Path, record: &StepRecord) -> std::io::Result<()> {
    let mut line = serde_json::to_string(record).map_err(std::io::Error::other)?;
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(steps)?;
    f.write_all(line.as_bytes())
}
