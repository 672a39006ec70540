//! `sacct`, as Slurm prints it: jobs that ran or run (today's by default; every one asked for
//! with `-j`), each with its `.batch` line and its `srun` steps unless `-X`, `--format` fields
//! with `%WIDTH`, `--parsable`/`--parsable2` (`--delimiter`), `-b`, `-n`, `-j`, `-u`, `--name`,
//! `-s`, `-A`, `-r`, `-a`, `-S`/`-E`, `-M`. As in Slurm (`src/sacct/options.c`), `-j`, `-u` and `--name` take comma-separated
//! lists and add up when repeated, and `-j` with an array's id lists every task of it.

use super::format::{slurm_elapsed, slurm_limit};
use super::squeue::{slurm_mem, state_names};
use crate::api::JobView;
use crate::api::steps::StepRecord;
use crate::client::Client;
use crate::controller::jobs::steps::StepView;

const DEFAULT: &str = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
/// `sacct --brief`.
const BRIEF: &str = "JobID,State,ExitCode";

/// sacct's options.
#[derive(clap::Parser, Debug)]
#[command(name = "sacct", no_binary_name = true, infer_long_args = true)]
pub struct SacctArgs {
    /// Only these jobs (comma-separated; repeatable); an array's id means all its tasks
    #[arg(short = 'j', long = "jobs", action = clap::ArgAction::Append, value_delimiter = ',')]
    jobs: Vec<String>,
    /// Only these users' jobs (comma-separated; repeatable)
    #[arg(short = 'u', long = "user", visible_alias = "uid", action = clap::ArgAction::Append, value_delimiter = ',')]
    users: Vec<String>,
    /// Only jobs in these states (CD,F or COMPLETED,FAILED; comma-separated; repeatable)
    #[arg(short = 's', long = "state", action = clap::ArgAction::Append, value_delimiter = ',')]
    states: Vec<String>,
    /// Only jobs of these accounts (comma-separated; repeatable)
    #[arg(short = 'A', long = "accounts", action = clap::ArgAction::Append, value_delimiter = ',')]
    accounts: Vec<String>,
    /// Only jobs in these partitions (comma-separated; repeatable)
    #[arg(short = 'r', long = "partition", action = clap::ArgAction::Append, value_delimiter = ',')]
    partitions: Vec<String>,
    /// JobID, State and ExitCode only
    #[arg(short = 'b', long = "brief")]
    brief: bool,
    /// List the fields --format takes
    #[arg(short = 'e', long = "helpformat")]
    helpformat: bool,
    /// With -p/-P: the text between fields [default: |]
    #[arg(long = "delimiter", value_name = "TEXT")]
    delimiter: Option<String>,
    /// Only jobs of these names (comma-separated; repeatable)
    #[arg(long = "name", action = clap::ArgAction::Append, value_delimiter = ',')]
    names: Vec<String>,
    /// The clusters to report on: labpool is one cluster, so `all` or any name is this one
    #[arg(short = 'M', long = "clusters")]
    _clusters: Option<String>,
    /// Every user's jobs
    #[arg(short = 'a', long = "allusers")]
    all: bool,
    /// Jobs that ended at or after this time [default: today 00:00]
    #[arg(short = 'S', long = "starttime")]
    start: Option<String>,
    /// Jobs that started before this time [default: now]
    #[arg(short = 'E', long = "endtime")]
    end: Option<String>,
    /// The fields: JobID,JobName%30,State…
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    /// Allocations only, not their steps
    #[arg(short = 'X', long = "allocations")]
    allocations: bool,
    /// No header
    #[arg(short = 'n', long = "noheader")]
    noheader: bool,
    /// Fields between `|`, one after the last
    #[arg(short = 'p', long = "parsable")]
    parsable: bool,
    /// Fields between `|`
    #[arg(short = 'P', long = "parsable2")]
    parsable2: bool,
}

/// One line: a job, its batch step, or one of its steps.
enum Row<'a> {
    Job(&'a JobView),
    Batch(&'a JobView),
    Step(&'a JobView, &'a StepRecord),
}

/// Runs sacct against the controller; returns what it prints.
pub async fn sacct(client: &Client, a: &SacctArgs, me: &str) -> anyhow::Result<String> {
    if a.helpformat {
        return Ok(help_format());
    }
    let now = chrono::Local::now();
    let when = |t: &Option<String>, default: i64| -> anyhow::Result<i64> {
        Ok(match t {
            Some(t) => crate::begin::parse_slurm_time("--starttime", t, now)?,
            None => default,
        })
    };
    let midnight = now
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .and_then(|d| d.and_local_timezone(chrono::Local).earliest())
        .map_or(0, |d| d.timestamp_millis());
    // With -j and no -S, Slurm looks back to the beginning: a job asked for by id is found
    // whenever it ran.
    let default_from = if a.jobs.is_empty() { midnight } else { 0 };
    let (from, to) = (when(&a.start, default_from)?, when(&a.end, i64::MAX)?);
    let user = if a.all || !a.users.is_empty() {
        None
    } else {
        Some(me.to_string())
    };
    let mut jobs: Vec<JobView> = client.get("/v1/jobs").await?;
    // Each -j as its job: a step (`12.0`, `12.batch`) is found through its job.
    let job_parts: Vec<String> = a
        .jobs
        .iter()
        .map(|e| e.trim().split('.').next().unwrap_or_default().to_string())
        .collect();
    // Asked for by id (submitit and snakemake poll their jobs in flight this way), only
    // those are fetched: an array task's id `12_3` is asked for as its array, 12.
    // More ids than one question may name: the whole history, filtered here.
    let by_id = (!a.jobs.is_empty() && a.jobs.len() <= crate::api::HISTORY_IDS).then(|| {
        job_parts
            .iter()
            .filter_map(|j| j.split('_').next())
            .filter(|j| j.parse::<u64>().is_ok())
            .collect::<Vec<_>>()
            .join(",")
    });
    jobs.extend(match by_id {
        Some(ids) if ids.is_empty() => Vec::new(),
        Some(ids) => {
            client
                .history_of(user.clone(), Some(from), Some(ids), 100_000)
                .await?
        }
        None => client.history(user.clone(), Some(from), 100_000).await?,
    });
    let list = |v: &[String]| -> Option<Vec<String>> {
        let v: Vec<String> = v
            .iter()
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect();
        (!v.is_empty()).then_some(v)
    };
    let (ids, names) = (list(&job_parts), list(&a.names));
    let (accounts, partitions) = (list(&a.accounts), list(&a.partitions));
    let states =
        list(&a.states).map(|s| s.iter().map(|x| x.to_ascii_uppercase()).collect::<Vec<_>>());
    let users = list(&a.users).or(user.map(|u| vec![u]));
    let ms = |t: Option<&str>| t.and_then(crate::clock::parse_ms);
    jobs.retain(|j| {
        ids.as_ref().is_none_or(|s| {
            s.contains(&j.id.to_string())
                || s.contains(&j.display_id())
                || j.array_id.is_some_and(|a| s.contains(&a.to_string()))
        }) && users.as_ref().is_none_or(|s| s.contains(&j.user))
            && names.as_ref().is_none_or(|s| s.contains(&j.name))
            && accounts
                .as_ref()
                .is_none_or(|s| j.account.as_ref().is_some_and(|a| s.contains(a)))
            && partitions.as_ref().is_none_or(|s| s.contains(&j.partition))
            && states.as_ref().is_none_or(|s| {
                let (long, short) = state_names(j.state);
                s.iter().any(|x| x == long || x == short)
            })
            && ms(Some(&j.submit_time)).is_some_and(|t| t <= to)
    });
    jobs.sort_by_key(|j| j.id);
    jobs.dedup_by_key(|j| j.id);
    // Every listed job's steps in one question per thousand jobs.
    let mut steps: std::collections::BTreeMap<u64, Vec<StepView>> = Default::default();
    if !a.allocations {
        for chunk in jobs.chunks(crate::api::HISTORY_IDS) {
            let ids: Vec<String> = chunk.iter().map(|j| j.id.to_string()).collect();
            let query = crate::api::StepsQuery { ids: ids.join(",") };
            let some: std::collections::BTreeMap<u64, Vec<StepView>> =
                client.get_query("/v1/steps", &query).await?;
            steps.extend(some);
        }
    }
    let details: Vec<Vec<StepRecord>> = jobs
        .iter()
        .map(|j| {
            steps
                .remove(&j.id)
                .unwrap_or_default()
                .into_iter()
                .map(|s| s.step)
                .collect()
        })
        .collect();
    let format = match (&a.format, a.brief) {
        (Some(f), _) => f.as_str(),
        (None, true) => BRIEF,
        (None, false) => DEFAULT,
    };
    let fields: Vec<(String, Option<usize>)> = format
        .split(',')
        .map(|f| match f.split_once('%') {
            Some((n, w)) => (n.trim().to_ascii_lowercase(), w.parse().ok()),
            None => (f.trim().to_ascii_lowercase(), None),
        })
        .collect();
    // `-j 12.0` or `-j 12.batch` names steps: only those lines of job 12, as Slurm lists them
    // (snakemake asks for each step's Reason so); `-j 12` names the whole job.
    let mut whole = std::collections::BTreeSet::new();
    let mut steps_named: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for entry in a.jobs.iter().map(|e| e.trim()) {
        match entry.split_once('.') {
            Some((job, step)) => steps_named.entry(job).or_default().push(step),
            None => {
                whole.insert(entry);
            }
        }
    }
    let mut rows = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let (raw, shown) = (j.id.to_string(), j.display_id());
        let only = [raw.as_str(), shown.as_str()]
            .iter()
            .find_map(|k| steps_named.get(k))
            .filter(|_| !whole.contains(raw.as_str()) && !whole.contains(shown.as_str()));
        match only {
            None => {
                rows.push(Row::Job(j));
                if !a.allocations && j.start_time.is_some() {
                    rows.push(Row::Batch(j));
                    rows.extend(details[i].iter().map(|s| Row::Step(j, s)));
                }
            }
            Some(named) => {
                if named.contains(&"batch") && j.start_time.is_some() {
                    rows.push(Row::Batch(j));
                }
                rows.extend(
                    details[i]
                        .iter()
                        .filter(|s| named.contains(&s.step.to_string().as_str()))
                        .map(|s| Row::Step(j, s)),
                );
            }
        }
    }
    let parsable = a.parsable || a.parsable2;
    let line = |cells: Vec<String>| -> String {
        if parsable {
            let delimiter = a.delimiter.as_deref().unwrap_or("|");
            let mut l = cells.join(delimiter);
            if a.parsable {
                l.push_str(delimiter);
            }
            l
        } else {
            let padded: Vec<String> = cells
                .iter()
                .zip(&fields)
                .map(|(c, (name, w))| {
                    let w = w.unwrap_or(default_width(name));
                    // As Slurm: a value too wide is cut, its last place a `+`.
                    let cut: String = if c.chars().count() > w {
                        c.chars().take(w.saturating_sub(1)).chain(['+']).collect()
                    } else {
                        c.clone()
                    };
                    if name == "jobid" {
                        format!("{cut:<w$}")
                    } else {
                        format!("{cut:>w$}")
                    }
                })
                .collect();
            padded.join(" ")
        }
    };
    let mut out = Vec::new();
    if !a.noheader {
        out.push(line(fields.iter().map(|(n, _)| header(n)).collect()));
        if !parsable {
            out.push(line(
                fields
                    .iter()
                    .map(|(n, w)| "-".repeat(w.unwrap_or(default_width(n))))
                    .collect(),
            ));
        }
    }
    for r in &rows {
        out.push(line(fields.iter().map(|(n, _)| value(r, n)).collect()));
    }
    Ok(out
        .join("\n")
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n"))
}

/// sacct's column width for a field given without `%WIDTH`.
fn default_width(name: &str) -> usize {
    match name {
        "jobid" => 12,
        "exitcode" => 8,
        _ => 10,
    }
}

/// The fields this sacct fills, as `--helpformat` lists them.
const FIELDS: &[&str] = &[
    "JobID",
    "JobIDRaw",
    "JobName",
    "Partition",
    "Account",
    "AllocCPUS",
    "State",
    "ExitCode",
    "Elapsed",
    "Start",
    "End",
    "Submit",
    "NodeList",
    "User",
    "Timelimit",
    "ReqMem",
    "AllocTRES",
    "NNodes",
    "NTasks",
    "Comment",
    "WorkDir",
    "Reason",
    "TRESUsageInAve",
    "TRESUsageInMax",
    "ConsumedEnergy",
];

/// `--helpformat`: the fields, four to a line, as Slurm lists them.
fn help_format() -> String {
    FIELDS
        .chunks(4)
        .map(|c| {
            c.iter()
                .map(|f| format!("{f:<19}"))
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn header(name: &str) -> String {
    FIELDS
        .iter()
        .find(|n| n.eq_ignore_ascii_case(name))
        .map_or_else(|| name.to_string(), |n| n.to_string())
}

fn value(r: &Row<'_>, name: &str) -> String {
    let j = match r {
        Row::Job(j) | Row::Batch(j) | Row::Step(j, _) => j,
    };
    let time = |t: Option<&str>| {
        t.and_then(crate::clock::parse_ms)
            .map_or_else(|| "Unknown".to_string(), crate::clock::short)
    };
    let exit = format!("{}:{}", j.exit_code.unwrap_or(0), j.signal.unwrap_or(0));
    let state = state_names(j.state).0.to_string();
    match (r, name) {
        (Row::Job(j), "jobid") => j.display_id(),
        (Row::Batch(j), "jobid") => format!("{}.batch", j.display_id()),
        (Row::Step(j, s), "jobid") => format!("{}.{}", j.display_id(), s.step),
        (_, "jobidraw") => j.id.to_string(),
        (Row::Job(j), "jobname") => j.name.clone(),
        (Row::Batch(_), "jobname") => "batch".into(),
        (Row::Step(_, s), "jobname") => s.name.split_whitespace().next().unwrap_or("").into(),
        (Row::Job(j), "partition") => j.partition.clone(),
        (_, "account") => j.account.clone().unwrap_or_default(),
        (Row::Step(_, s), "state") => s.state().into(),
        // As Slurm's accounting has it: the job's line names who cancelled it, by uid.
        (Row::Job(j), "state") if j.state == labpool_scheduler::JobState::Cancelled => {
            let uid = j
                .cancelled_by
                .as_deref()
                .and_then(|name| nix::unistd::User::from_name(name).ok().flatten())
                .map_or(0, |u| u.uid.as_raw());
            format!("CANCELLED by {uid}")
        }
        (_, "state") => state,
        (Row::Step(_, s), "exitcode") => {
            format!("{}:{}", s.exit_code.min(255), s.signal.unwrap_or(0))
        }
        // Slurm's accounting gives a cancelled allocation 0:0 (its batch line has the signal).
        (Row::Job(j), "exitcode") if j.state == labpool_scheduler::JobState::Cancelled => {
            "0:0".into()
        }
        (_, "exitcode") => exit,
        (Row::Job(j), "alloccpus") => (j.cpus * j.node_count).to_string(),
        (_, "alloccpus") => j.cpus.to_string(),
        (Row::Step(_, s), "elapsed") => slurm_elapsed(s.elapsed_s(crate::clock::now_ms())),
        (_, "elapsed") => slurm_elapsed(j.elapsed_s.unwrap_or(0)),
        (Row::Step(_, s), "start") => crate::clock::short(s.start_ms),
        (Row::Step(_, s), "end") if s.is_running() => "Unknown".into(),
        (Row::Step(_, s), "end") => crate::clock::short(s.end_ms),
        (_, "start") => time(j.start_time.as_deref()),
        (_, "end") => time(j.end_time.as_deref()),
        (_, "submit") => time(Some(&j.submit_time)),
        (_, "nodelist") => j.nodelist().unwrap_or_else(|| "None assigned".into()),
        (Row::Job(j), "user") => j.user.clone(),
        (Row::Job(j), "timelimit") => slurm_limit(j.time_limit_s),
        (Row::Job(j), "reqmem") => slurm_mem(j.mem_mib),
        (Row::Job(j), "alloctres") => {
            let n = j.node_count;
            let (cpus, mem) = (j.cpus * n, slurm_mem(j.mem_mib * u64::from(n)));
            match (j.gpus_requested * n, j.slice) {
                (0, _) => format!("cpu={cpus},mem={mem},node={n}"),
                // Shards are a resource of their own in Slurm's accounting.
                (_, Some(labpool_scheduler::slice::Slice::Shards(s))) => {
                    format!("cpu={cpus},gres/shard={s},mem={mem},node={n}")
                }
                (g, _) => format!("cpu={cpus},gres/gpu={g},mem={mem},node={n}"),
            }
        }
        (Row::Job(j), "nnodes") => j.node_count.to_string(),
        (Row::Step(_, s), "nnodes") => s.nodes.len().max(1).to_string(),
        (_, "nnodes") => "1".into(),
        (Row::Step(_, s), "ntasks") => s.tasks.to_string(),
        (Row::Batch(_), "ntasks") => "1".into(),
        (Row::Job(j), "comment") => j.comment.clone().unwrap_or_default(),
        (Row::Job(j), "workdir") => j.workdir.display().to_string(),
        (Row::Job(j), "reason") => j.reason.clone().unwrap_or_else(|| "None".into()),
        // Slurm's GPU accounting TRES (acct_gather_gpu): mean and peak utilisation and memory.
        (Row::Job(j), "tresusageinave") => j.gpu_usage.as_ref().map_or_else(String::new, |u| {
            format!(
                "gres/gpumem={}M,gres/gpuutil={:.0}",
                u.mem_peak_mib, u.util_mean
            )
        }),
        (Row::Job(j), "tresusageinmax") => j.gpu_usage.as_ref().map_or_else(String::new, |u| {
            format!(
                "gres/gpumem={}M,gres/gpuutil={:.0}",
                u.mem_peak_mib, u.util_peak
            )
        }),
        // Joules, as Slurm's energy accounting gives it.
        (Row::Job(j), "consumedenergy") => j
            .gpu_usage
            .as_ref()
            .map_or_else(String::new, |u| format!("{:.0}", u.energy_kwh * 3.6e6)),
        _ => String::new(),
    }
}
