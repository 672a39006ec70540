//! `scontrol`: `show hostnames` (what job scripts use), `show job`, `show node`,
//! `show partition`, `show config`, `hold`, `release`, `requeue` and `update JobId=…`.

use super::squeue::{slurm_mem, state_names};
use crate::api::{CancelOutcome, HoldRequest, NodeView};
use crate::client::Client;
use crate::controller::http::JobDetail;
use labpool_scheduler::hostlist::expand;
use tokio::signal::unix::SignalKind;

/// The reason Slurm's controller gives an ended job (`FAIL_EXIT_CODE` is `NonZeroExitCode`, …);
/// `None` for the others.
fn end_reason(state: labpool_scheduler::JobState) -> &'static str {
    use labpool_scheduler::JobState;
    match state {
        JobState::Failed => "NonZeroExitCode",
        JobState::Timeout => "TimeLimit",
        JobState::NodeFail => "NodeDown",
        JobState::OutOfMemory => "OutOfMemory",
        JobState::Deadline => "DeadLine",
        _ => "None",
    }
}

/// `scontrol help`.
const HELP: &str = "scontrol [-o] COMMAND\n\n  show hostnames [LIST]   expand a host list (default $SLURM_JOB_NODELIST)\n  show job [ID]           a job, or every job in the queue\n  show node [NAME]        a node, or every node\n  show partition [NAME]   a partition, or every partition\n  show config             the settings libraries read (MinJobAge, ClusterName, SLURM_VERSION)\n  hold ID, uhold ID       keep a pending job from starting\n  release ID              let it start again\n  requeue ID              stop a job and queue it again\n  update JobId=ID K=V     TimeLimit=, Partition=, Dependency=, NumNodes=1\n\n-o, --oneliner puts each record on one line; docs/slurm-compatibility.md lists the rest";

/// Runs `scontrol WORDS`; returns what it prints.
pub async fn scontrol(client: &Client, words: &[String]) -> anyhow::Result<String> {
    let one_line = words.iter().any(|w| w == "-o" || w == "--oneliner");
    let words: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .filter(|w| !matches!(*w, "-o" | "--oneliner"))
        .collect();
    if words.first() == Some(&"help") || words.iter().any(|w| matches!(*w, "-h" | "--help")) {
        return Ok(HELP.to_string());
    }
    if let Some(option) = words.iter().find(|w| w.starts_with('-')) {
        anyhow::bail!(
            "unknown option '{option}': this scontrol takes -o/--oneliner and the options docs/slurm-compatibility.md lists"
        );
    }
    // Records of `show` come one after another, a blank line between, as Slurm prints them.
    let records = |r: Vec<String>| r.join(if one_line { "\n" } else { "\n\n" });
    match words.as_slice() {
        ["show", "hostnames" | "hostname", rest @ ..] => hostnames(rest.first().copied()),
        ["show", "config"] => Ok(show_config()),
        ["show", "job" | "jobs" | "jobid", id] => {
            let d: JobDetail = client.get(&format!("/v1/jobs/{id}")).await?;
            Ok(show_job(&d, one_line))
        }
        ["show", "job" | "jobs" | "jobid"] => {
            let jobs: Vec<crate::api::JobView> = client.get("/v1/jobs").await?;
            if jobs.is_empty() {
                return Ok("No jobs in the system".into());
            }
            let mut shown = Vec::new();
            // One request a job: the first thousand, and how many more there are.
            const MOST: usize = 1000;
            let more = jobs.len().saturating_sub(MOST);
            for j in jobs.into_iter().take(MOST) {
                let d: JobDetail = client.get(&format!("/v1/jobs/{}", j.id)).await?;
                shown.push(show_job(&d, one_line));
            }
            if more > 0 {
                shown.push(format!(
                    "({more} more jobs not shown: `scontrol show job ID` shows one)"
                ));
            }
            Ok(records(shown))
        }
        ["show", "node" | "nodes", rest @ ..] if rest.len() <= 1 => {
            let nodes: Vec<NodeView> = client.get("/v1/nodes").await?;
            let shown: Vec<String> = nodes
                .iter()
                .filter(|n| rest.first().is_none_or(|name| n.name == *name))
                .map(|n| show_node(n, one_line))
                .collect();
            match rest.first() {
                Some(name) if shown.is_empty() => anyhow::bail!("Node {name} not found"),
                _ => Ok(records(shown)),
            }
        }
        ["show", "partition" | "partitions", rest @ ..] if rest.len() <= 1 => {
            let parts: Vec<crate::api::PartitionView> = client.get("/v1/partitions").await?;
            let nodes: Vec<NodeView> = client.get("/v1/nodes").await?;
            let shown: Vec<String> = parts
                .iter()
                .filter(|p| rest.first().is_none_or(|name| p.name == *name))
                .map(|p| super::scontrol_partition::show_partition(p, &nodes, one_line))
                .collect();
            match rest.first() {
                Some(name) if shown.is_empty() => {
                    anyhow::bail!("Partition {name} not found")
                }
                _ => Ok(records(shown)),
            }
        }
        [verb @ ("hold" | "release" | "uhold"), ids @ ..] if !ids.is_empty() => {
            let body = HoldRequest {
                ids: split_ids(ids),
                hold: *verb != "release",
            };
            post_ids(client, "/v1/jobs/hold", &body).await
        }
        ["update", pairs @ ..] => update(client, pairs).await,
        ["requeue", ids @ ..] if !ids.is_empty() => {
            let body = crate::api::CancelRequest {
                ids: split_ids(ids),
            };
            // Inside a job, the job may be the one requeued (submitit's checkpoint runs
            // `scontrol requeue $SLURM_JOB_ID`): its stop's SIGTERM reaches this process too,
            // and could end it before it hears the answer and exits 0, which submitit takes
            // for a failure. Slurm's scontrol has exited before slurmd signals the job. So
            // SIGTERM is held off here (taken by a handler nobody reads) until this short
            // process exits; the stop's SIGKILL after the grace still ends it.
            let _held = std::env::var_os("SLURM_JOB_ID")
                .and_then(|_| tokio::signal::unix::signal(SignalKind::terminate()).ok());
            post_ids(client, "/v1/jobs/requeue", &body).await
        }
        _ => anyhow::bail!(
            "this scontrol knows `show hostnames [LIST]`, `show job [ID]`, `show node [NAME]`, `show partition [NAME]`, `show config`, `hold ID`, `release ID`, `requeue ID` and `update JobId=ID ...`"
        ),
    }
}

/// `scontrol update JobId=12 TimeLimit=2:00:00 Partition=debug NumNodes=1 Dependency=afterok:11`.
async fn update(client: &Client, pairs: &[&str]) -> anyhow::Result<String> {
    let mut req = crate::api::UpdateRequest::default();
    let mut id = None;
    let mut unknown = Vec::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            unknown.push(pair.to_string());
            continue;
        };
        let value = Some(value.to_string());
        match key.to_ascii_lowercase().as_str() {
            "jobid" => id = value.and_then(|v| v.parse::<u64>().ok()),
            "timelimit" => req.time_limit = value,
            "partition" => req.partition = value,
            "dependency" => req.dependency = value,
            "numnodes" => req.nodes = value,
            _ => unknown.push(pair.to_string()),
        }
    }
    if !unknown.is_empty() {
        anyhow::bail!(
            "update {}: this scontrol updates JobId=, TimeLimit=, Partition=, NumNodes= and Dependency=",
            unknown.join(" ")
        );
    }
    req.id = id.ok_or_else(|| anyhow::anyhow!("give the job as JobId=N"))?;
    let _: String = client.post("/v1/jobs/update", &req).await?;
    Ok(String::new())
}

/// `12,13 14` → each id.
fn split_ids(words: &[&str]) -> Vec<String> {
    words
        .iter()
        .flat_map(|w| w.split(','))
        .map(str::to_string)
        .collect()
}

/// Posts a request about jobs; silent when every job was acted on, else each refusal.
async fn post_ids(
    client: &Client,
    path: &str,
    body: &impl serde::Serialize,
) -> anyhow::Result<String> {
    let out: Vec<CancelOutcome> = client.post(path, body).await?;
    let failed: Vec<String> = out
        .iter()
        .filter(|o| !o.ok)
        .map(|o| o.message.clone())
        .collect();
    if failed.is_empty() {
        Ok(String::new())
    } else {
        anyhow::bail!("{}", failed.join("\n"))
    }
}

fn hostnames(list: Option<&str>) -> anyhow::Result<String> {
    let list = match list {
        Some(l) => l.to_string(),
        None => std::env::var("SLURM_JOB_NODELIST").unwrap_or_default(),
    };
    Ok(expand(&list)?.join("\n"))
}

/// `key=value` groups, one line each, indented as scontrol does (or all on one line with -o).
pub(super) fn layout(lines: Vec<Vec<(&str, String)>>, one_line: bool) -> String {
    let lines: Vec<String> = lines
        .into_iter()
        .map(|l| {
            l.into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    if one_line {
        lines.join(" ")
    } else {
        lines.join("\n   ")
    }
}

/// When a job ends: when it did; for a running job, when its time limit ends it (as Slurm
/// shows it); `Unknown` while it waits or runs without a limit.
fn end_time(j: &crate::api::JobView) -> String {
    let ms = |t: Option<&str>| t.and_then(crate::clock::parse_ms);
    let end = ms(j.end_time.as_deref()).or_else(|| {
        let start = ms(j.start_time.as_deref())?;
        Some(start + 1000 * j.time_limit_s? as i64)
    });
    end.map_or_else(|| "Unknown".to_string(), crate::clock::short)
}

/// The settings of `scontrol show config` that mean something on a labpool pool, in Slurm's
/// layout (`Name                    = value`).
fn show_config() -> String {
    let lines = [
        ("ClusterName", "labpool".to_string()),
        ("MinJobAge", format!("{} sec", super::MIN_JOB_AGE_S)),
        ("SLURM_VERSION", "22.05.8".to_string()),
    ];
    let mut out = format!(
        "Configuration data as of {}\n",
        crate::clock::short(crate::clock::now_ms())
    );
    for (k, v) in lines {
        out.push_str(&format!("{k:<23} = {v}\n"));
    }
    out.trim_end().to_string()
}

fn show_job(d: &JobDetail, one_line: bool) -> String {
    let j = &d.job;
    let time = |t: Option<&str>| {
        t.and_then(crate::clock::parse_ms)
            .map_or_else(|| "Unknown".to_string(), crate::clock::short)
    };
    let null = |v: Option<String>| v.unwrap_or_else(|| "(null)".into());
    let gres = match (j.gpus_requested, j.slice) {
        (0, _) => String::new(),
        (_, Some(labpool_scheduler::slice::Slice::Shards(s))) => format!(",gres/shard={s}"),
        (n, _) => format!(",gres/gpu={n}"),
    };
    layout(
        vec![
            vec![("JobId", j.id.to_string()), ("JobName", j.name.clone())],
            vec![("UserId", format!("{}({})", j.user, j.uid))],
            vec![("Account", null(j.account.clone()))],
            vec![
                ("JobState", state_names(j.state).0.to_string()),
                (
                    "Reason",
                    j.reason
                        .clone()
                        .unwrap_or_else(|| end_reason(j.state).to_string()),
                ),
                ("Dependency", null(j.dependency.clone())),
            ],
            vec![(
                "ExitCode",
                format!("{}:{}", j.exit_code.unwrap_or(0), j.signal.unwrap_or(0)),
            )],
            vec![
                (
                    "RunTime",
                    super::format::slurm_elapsed(j.elapsed_s.unwrap_or(0)),
                ),
                ("TimeLimit", super::format::slurm_limit(j.time_limit_s)),
            ],
            vec![
                ("SubmitTime", time(Some(&j.submit_time))),
                ("StartTime", time(j.start_time.as_deref())),
                ("EndTime", end_time(j)),
            ],
            vec![
                ("Partition", j.partition.clone()),
                ("NodeList", null(j.nodelist())),
            ],
            vec![
                ("NumNodes", j.node_count.to_string()),
                ("NumCPUs", (j.cpus * j.node_count).to_string()),
                ("NumTasks", j.ntasks.to_string()),
            ],
            vec![(
                "TRES",
                format!(
                    "cpu={},mem={},node={}{gres}",
                    j.cpus * j.node_count,
                    slurm_mem(j.mem_mib * u64::from(j.node_count)),
                    j.node_count
                ),
            )],
            vec![("MinMemoryNode", slurm_mem(j.mem_mib))],
            vec![("Comment", null(j.comment.clone()))],
            vec![("WorkDir", j.workdir.display().to_string())],
            vec![(
                "StdOut",
                null(j.stdout.as_ref().map(|p| p.display().to_string())),
            )],
        ],
        one_line,
    )
}

fn show_node(n: &NodeView, one_line: bool) -> String {
    // Slurm writes a node that stopped answering as `IDLE+NOT_RESPONDING`.
    let state = format!(
        "{}{}",
        n.state.as_str(),
        if n.responding { "" } else { "+NOT_RESPONDING" }
    );
    let gres = match n.gpus.first() {
        Some(g) => format!("gpu:{}:{}", g.gpu_type, n.gpus.len()),
        None => "(null)".into(),
    };
    layout(
        vec![
            vec![("NodeName", n.name.clone())],
            vec![
                ("CPUAlloc", n.cpus_used.to_string()),
                ("CPUTot", n.cpus.to_string()),
            ],
            vec![(
                "AvailableFeatures",
                if n.features.is_empty() {
                    "(null)".into()
                } else {
                    n.features.join(",")
                },
            )],
            vec![("Gres", gres)],
            vec![
                ("RealMemory", n.mem_mib.to_string()),
                ("AllocMem", n.mem_used_mib.to_string()),
            ],
            vec![("State", state)],
            vec![(
                "Reason",
                n.reason.clone().unwrap_or_else(|| "(null)".into()),
            )],
        ],
        one_line,
    )
}
