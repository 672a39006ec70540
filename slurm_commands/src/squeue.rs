//! `squeue`, as Slurm prints it: the default columns, `-o/--format` with the common `%`
//! fields, `-l`, `-u`, `--me`, `-t`, `-p`, `-j` (an array's id: all its tasks), `-n`, `-A`,
//! `-w`, `-h` and `--start`.

use super::format::{parse_format, render, slurm_elapsed, slurm_limit};
use crate::api::{JobView, WhyView};
use crate::client::Client;
use labpool_scheduler::JobState;
use labpool_scheduler::slice::Slice;

/// squeue's default format.
const DEFAULT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
/// `squeue --long`.
const LONG: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
/// `squeue --start`.
const START: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";

/// squeue's options.
#[derive(clap::Parser, Debug)]
#[command(
    name = "squeue",
    no_binary_name = true,
    infer_long_args = true,
    disable_help_flag = true
)]
pub struct SqueueArgs {
    /// Only these users' jobs (comma-separated)
    #[arg(short = 'u', long = "user")]
    users: Option<String>,
    /// Only my jobs
    #[arg(long)]
    me: bool,
    /// Only jobs in these states (PD,R or PENDING,RUNNING)
    #[arg(short = 't', long = "states")]
    states: Option<String>,
    /// Only these partitions
    #[arg(short = 'p', long = "partition")]
    partitions: Option<String>,
    /// Only these jobs
    #[arg(short = 'j', long = "jobs", visible_alias = "job")]
    jobs: Option<String>,
    /// Only jobs of these names
    #[arg(short = 'n', long = "name")]
    names: Option<String>,
    /// Only jobs of these accounts
    #[arg(short = 'A', long = "account")]
    accounts: Option<String>,
    /// The output format
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    /// No header line
    #[arg(short = 'h', long = "noheader")]
    noheader: bool,
    /// Print help (-h is --noheader, as in Slurm)
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Waiting jobs with their expected start
    #[arg(long)]
    start: bool,
    /// Slurm's long columns (state in full, time limit)
    #[arg(short = 'l', long = "long")]
    long: bool,
    /// Only jobs on these nodes (a host list)
    #[arg(short = 'w', long = "nodelist")]
    nodelist: Option<String>,
}

/// Runs squeue against the controller; returns what it prints.
pub async fn squeue(client: &Client, a: &SqueueArgs, me: &str) -> anyhow::Result<String> {
    let list = |s: &Option<String>| -> Option<Vec<String>> {
        s.as_ref()
            .map(|v| v.split(',').map(|x| x.trim().to_string()).collect())
    };
    let users = if a.me {
        Some(vec![me.to_string()])
    } else {
        list(&a.users)
    };
    let mut jobs: Vec<JobView> = client.get("/v1/jobs").await?;
    let states =
        list(&a.states).map(|s| s.iter().map(|x| x.to_ascii_uppercase()).collect::<Vec<_>>());
    // Asked for ended states, squeue shows the jobs that ended within MinJobAge, as Slurm
    // keeps them that long.
    let ended_asked = states.as_ref().is_some_and(|s| {
        s.iter().any(|x| {
            !matches!(
                x.as_str(),
                "PENDING" | "PD" | "RUNNING" | "R" | "CONFIGURING" | "CF" | "COMPLETING" | "CG"
            )
        })
    });
    if ended_asked {
        let since = crate::clock::now_ms() - 1000 * super::MIN_JOB_AGE_S;
        let ended = client.history(None, Some(since), 10_000).await?;
        jobs.extend(
            ended
                .into_iter()
                .filter(|j| j.end_time.as_deref().and_then(crate::clock::parse_ms) >= Some(since)),
        );
        let mut seen = std::collections::BTreeSet::new();
        jobs.retain(|j| seen.insert(j.id));
    }
    let (partitions, ids, names, accounts) = (
        list(&a.partitions),
        list(&a.jobs),
        list(&a.names),
        list(&a.accounts),
    );
    let within =
        |set: &Option<Vec<String>>, v: &str| set.as_ref().is_none_or(|s| s.iter().any(|x| x == v));
    let on_nodes = match &a.nodelist {
        Some(list) => Some(
            labpool_scheduler::hostlist::expand(list)
                .map_err(|e| anyhow::anyhow!("--nodelist {list}: {e}"))?,
        ),
        None => None,
    };
    jobs.retain(|j| {
        let (long, short) = state_names(j.state);
        within(&users, &j.user)
            && states
                .as_ref()
                .is_none_or(|s| s.iter().any(|x| x == long || x == short || x == "ALL"))
            && within(&partitions, &j.partition)
            && (within(&ids, &j.id.to_string())
                || within(&ids, &j.display_id())
                || j.array_id.is_some_and(|a| within(&ids, &a.to_string())))
            && on_nodes.as_ref().is_none_or(|want| {
                j.nodelist()
                    .and_then(|l| labpool_scheduler::hostlist::expand(&l).ok())
                    .is_some_and(|have| have.iter().any(|n| want.contains(n)))
            })
            && within(&names, &j.name)
            && within(&accounts, j.account.as_deref().unwrap_or(""))
            && (!a.start || j.state == JobState::Pending)
    });
    let mut reserved = std::collections::BTreeMap::new();
    if a.start {
        for j in &jobs {
            let why: WhyView = client.get(&format!("/v1/jobs/{}/why", j.id)).await?;
            if let Some((node, at)) = why.note.and_then(|n| n.reservation) {
                reserved.insert(j.id, (node, at));
            }
        }
    }
    let format = a.format.as_deref().unwrap_or(match (a.start, a.long) {
        (true, _) => START,
        (false, true) => LONG,
        (false, false) => DEFAULT,
    });
    let pieces = parse_format(format);
    let mut out = Vec::new();
    if !a.noheader {
        out.push(render(&pieces, header));
    }
    for j in &jobs {
        let res = reserved.get(&j.id);
        out.push(render(&pieces, |c| field(j, c, res)));
    }
    Ok(out.join("\n"))
}

/// Slurm's long and compact names of a state. STAGING (datasets or environment being put on
/// the node) is Slurm's CONFIGURING: placed, not yet running the script.
pub fn state_names(s: JobState) -> (&'static str, &'static str) {
    match s {
        JobState::Pending => ("PENDING", "PD"),
        JobState::Staging => ("CONFIGURING", "CF"),
        JobState::Running => ("RUNNING", "R"),
        JobState::Completed => ("COMPLETED", "CD"),
        JobState::Failed => ("FAILED", "F"),
        JobState::Cancelled => ("CANCELLED", "CA"),
        JobState::Timeout => ("TIMEOUT", "TO"),
        JobState::NodeFail => ("NODE_FAIL", "NF"),
        JobState::OutOfMemory => ("OUT_OF_MEMORY", "OOM"),
        JobState::Deadline => ("DEADLINE", "DL"),
    }
}

fn header(c: char) -> String {
    match c {
        'i' | 'A' => "JOBID",
        'P' => "PARTITION",
        'j' => "NAME",
        'u' => "USER",
        'a' => "ACCOUNT",
        't' => "ST",
        'T' => "STATE",
        'M' => "TIME",
        'l' => "TIME_LIMIT",
        'L' => "TIME_LEFT",
        'D' => "NODES",
        'C' => "CPUS",
        'm' => "MIN_MEMORY",
        'b' => "TRES_PER_NODE",
        'N' => "NODELIST",
        'R' => "NODELIST(REASON)",
        'r' => "REASON",
        'S' => "START_TIME",
        'V' => "SUBMIT_TIME",
        'Y' => "SCHEDNODES",
        'Z' => "WORK_DIR",
        'q' => "QOS",
        'K' => "ARRAY_TASK_ID",
        _ => "",
    }
    .to_string()
}

/// Memory as Slurm prints a request: `4G`, `1500M`, `0`.
pub fn slurm_mem(mib: u64) -> String {
    match mib {
        0 => "0".to_string(),
        m if m % (1024 * 1024) == 0 => format!("{}T", m / (1024 * 1024)),
        m if m % 1024 == 0 => format!("{}G", m / 1024),
        m => format!("{m}M"),
    }
}

fn field(
    j: &JobView,
    c: char,
    reserved: Option<&(String, labpool_scheduler::Timestamp)>,
) -> String {
    let (long, short) = state_names(j.state);
    let running = matches!(j.state, JobState::Running | JobState::Staging);
    let time = |t: Option<&str>| {
        t.and_then(crate::clock::parse_ms)
            .map_or_else(|| "N/A".to_string(), crate::clock::short)
    };
    let elapsed = j.elapsed_s.unwrap_or(0);
    match c {
        'i' => j.display_id(),
        'A' => j.array_id.unwrap_or(j.id).to_string(),
        'K' => j
            .array_task
            .map_or_else(|| "N/A".to_string(), |t| t.to_string()),
        'P' => j.partition.clone(),
        'j' => j.name.clone(),
        'u' => j.user.clone(),
        'a' => j.account.clone().unwrap_or_else(|| "(null)".into()),
        't' => short.into(),
        'T' => long.into(),
        'M' => slurm_elapsed(elapsed),
        'l' => slurm_limit(j.time_limit_s),
        'L' => j.time_limit_s.map_or_else(
            || "UNLIMITED".into(),
            |l| slurm_elapsed(l.saturating_sub(elapsed)),
        ),
        'D' => j.node_count.to_string(),
        'C' => (j.cpus * j.node_count).to_string(),
        'm' => slurm_mem(j.mem_mib),
        'b' => match (j.gpus_requested, &j.gpu_type) {
            (0, _) => "N/A".into(),
            (_, t) if j.slice.is_some() => {
                format!(
                    "gres:{}",
                    j.slice.unwrap_or(Slice::Shards(1)).gres(t.as_deref())
                )
            }
            (n, Some(t)) => format!("gres:gpu:{t}:{n}"),
            (n, None) => format!("gres:gpu:{n}"),
        },
        'N' => j.nodelist().filter(|_| running).unwrap_or_default(),
        'R' => match (j.nodelist(), running) {
            (Some(n), true) => n,
            _ => format!("({})", j.reason.as_deref().unwrap_or("None")),
        },
        'r' => j.reason.clone().unwrap_or_else(|| "None".into()),
        // Started; else where the scheduler holds it a place; else, waiting for its --begin,
        // no earlier than that (as Slurm shows it).
        'S' => match (&j.start_time, reserved, &j.begin_time) {
            (Some(s), _, _) => time(Some(s)),
            (None, Some((_, at)), _) => crate::clock::short(at.0),
            (None, None, Some(b)) => time(Some(b)),
            _ => "N/A".into(),
        },
        'Y' => reserved.map_or_else(|| "(null)".into(), |(n, _)| n.clone()),
        'V' => time(Some(&j.submit_time)),
        'Z' => j.workdir.display().to_string(),
        'q' => "normal".into(),
        _ => String::new(),
    }
}
