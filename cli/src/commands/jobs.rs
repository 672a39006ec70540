//! `queue`, `show`, `cancel` and `history`.

use crate::api::{CancelOutcome, CancelRequest, JobView, JobsQuery};
use crate::args::{CancelArgs, HistoryArgs, QueueArgs, ShowArgs};
use crate::client::Client;
use crate::controller::http::JobDetail;
use crate::identity::{effective_uid, user_name};
use crate::render::{exit_text, gpu_list, or_dash, print, printable, table};
use crate::settings::Config;
use crate::when::parse_when;
use labpool_scheduler::JobState;
use labpool_units::format_elapsed;
use labpool_units::format_mib;

/// An RFC 3339 time from the API as labpool writes moments ([`crate::clock::when`]), or `-`.
pub(crate) fn moment(rfc: Option<&str>) -> String {
    rfc.and_then(crate::clock::parse_ms)
        .map_or_else(|| "-".to_string(), crate::clock::when)
}

fn gpus_asked(j: &JobView) -> String {
    let each = match (&j.gpu_type, j.gpus_requested) {
        (_, 0) => "0".to_string(),
        (Some(t), n) => format!("{n}:{t}"),
        (None, n) => n.to_string(),
    };
    match j.node_count {
        0 | 1 => each,
        n => format!("{each} on each of {n} nodes"),
    }
}

/// What `show` says of a job's GPUs: how many it asked for, and which it holds.
fn gpus_line(j: &JobView) -> String {
    let shared = match (j.slice, j.gpu_share) {
        (Some(slice), _) => format!(", a slice: {slice}"),
        (None, true) => ", shared".to_string(),
        (None, false) => String::new(),
    };
    match (j.gpus_requested, j.gpus.as_slice()) {
        (0, _) => "none asked".to_string(),
        (_, []) => format!("{} asked{shared}; none held yet", gpus_asked(j)),
        (_, held) => {
            let mut on = vec![format!(
                "GPU {} on {}",
                gpu_list(held),
                or_dash(j.node.as_ref())
            )];
            on.extend(
                j.others
                    .iter()
                    .map(|s| format!("GPU {} on {}", gpu_list(&s.gpus), s.node)),
            );
            format!("{} asked{shared}; holds {}", gpus_asked(j), on.join(", "))
        }
    }
}

fn where_or_why(j: &JobView) -> String {
    match (&j.node, &j.reason) {
        (Some(_), _) if j.state == JobState::Running && !j.others.is_empty() => {
            format!(
                "{} [{} nodes]",
                j.nodelist().unwrap_or_default(),
                j.node_count
            )
        }
        (Some(node), _) if j.state == JobState::Running => {
            format!("{node} [{}]", gpu_list(&j.gpus))
        }
        (Some(node), _) if j.state == JobState::Staging => format!(
            "{node} [{}] ({})",
            gpu_list(&j.gpus),
            j.reason_detail.as_deref().unwrap_or("staging")
        ),
        (_, Some(code)) => match &j.reason_detail {
            Some(d) if !d.is_empty() => format!("({code}: {d})"),
            _ => format!("({code})"),
        },
        _ => "-".to_string(),
    }
}

/// Runs `labpool queue`.
pub async fn queue(args: &QueueArgs, config: &Config) -> anyhow::Result<()> {
    let user = if args.me {
        Some(user_name(effective_uid()))
    } else {
        args.user.clone()
    };
    let jobs: Vec<JobView> = Client::new(&config.controller.socket)
        .get_query("/v1/jobs", &JobsQuery { user })
        .await?;
    print(args.json, &jobs, |jobs| {
        let rows = jobs
            .iter()
            .map(|j| {
                vec![
                    j.display_id(),
                    j.partition.clone(),
                    j.name.clone(),
                    j.user.clone(),
                    j.state.to_string(),
                    format_elapsed(j.elapsed_s.unwrap_or(0)),
                    gpus_asked(j),
                    where_or_why(j),
                ]
            })
            .collect();
        let headers = [
            "JOBID",
            "PARTITION",
            "NAME",
            "USER",
            "STATE",
            "TIME",
            "GPUS",
            "NODE(REASON)",
        ];
        table(&headers, rows)
    });
    Ok(())
}

/// Runs `labpool show`.
pub async fn show(args: &ShowArgs, config: &Config) -> anyhow::Result<()> {
    let d: JobDetail = Client::new(&config.controller.socket)
        .get(&format!("/v1/jobs/{}", args.id))
        .await?;
    print(args.json, &d, show_text);
    Ok(())
}

fn show_text(d: &JobDetail) -> String {
    let j = &d.job;
    let reason = match (&j.reason, &j.reason_detail) {
        (Some(c), Some(dt)) => format!("{c}: {dt}"),
        (Some(c), None) => c.clone(),
        (None, Some(dt)) => dt.clone(),
        (None, None) => "-".to_string(),
    };
    let exit = exit_text(j.exit_code, j.signal);
    let limit = j
        .time_limit_s
        .map_or_else(|| "UNLIMITED".to_string(), format_elapsed);
    let fields: Vec<(&str, String)> = vec![
        ("user", format!("{} (uid {})", j.user, j.uid)),
        ("state", j.state.to_string()),
        ("reason", reason),
        ("partition", j.partition.clone()),
        ("node", or_dash(j.nodelist().as_ref())),
        ("gpus", gpus_line(j)),
        (
            "env",
            match (&j.env, &j.env_id) {
                (Some(n), Some(id)) => format!("{n} ({id})"),
                _ => "-".to_string(),
            },
        ),
        ("isolation", or_dash(j.isolation.as_ref())),
        (
            "gpu use",
            j.gpu_usage.as_ref().map_or_else(
                || "-".to_string(),
                |u| {
                    format!(
                        "{:.0}% mean, {:.0}% peak, {} peak memory, {:.3} kWh",
                        u.util_mean,
                        u.util_peak,
                        format_mib(u.mem_peak_mib),
                        u.energy_kwh
                    )
                },
            ),
        ),
        ("cpus", j.cpus.to_string()),
        (
            "memory",
            if j.mem_mib == 0 {
                "-".to_string()
            } else {
                format_mib(j.mem_mib)
            },
        ),
        ("time limit", limit),
        ("submitted", moment(Some(&j.submit_time))),
        ("not before", moment(j.begin_time.as_deref())),
        ("comment", or_dash(j.comment.as_ref())),
        ("started", moment(j.start_time.as_deref())),
        ("ended", moment(j.end_time.as_deref())),
        (
            "elapsed",
            j.elapsed_s.map_or_else(|| "-".to_string(), format_elapsed),
        ),
        ("exit code", exit),
        ("workdir", j.workdir.display().to_string()),
        ("stdout", or_dash(j.stdout.as_ref().map(|p| p.display()))),
        ("stderr", or_dash(j.stderr.as_ref().map(|p| p.display()))),
        ("attempt", j.attempt.to_string()),
    ];
    let mut out = format!("Job {} ({})\n", j.id, printable(&j.name));
    for (k, v) in fields {
        if matches!(k, "not before" | "comment") && v == "-" {
            continue;
        }
        out.push_str(&format!("  {k:<11} {}\n", printable(&v)));
    }
    out.push_str("Events");
    let rows = d
        .events
        .iter()
        .map(|e| {
            vec![
                moment(Some(&e.time)),
                e.event.clone(),
                printable(e.detail.as_deref().unwrap_or_default()),
            ]
        })
        .collect();
    for line in table(&["TIME", "EVENT", "DETAIL"], rows).lines() {
        out.push_str(&format!("\n  {line}"));
    }
    if !d.steps.is_empty() {
        out.push_str("\nSteps");
        let rows = d
            .steps
            .iter()
            .map(|s| {
                let st = &s.step;
                vec![
                    format!("{}.{}", j.id, st.step),
                    st.name.clone(),
                    st.tasks.to_string(),
                    st.nodes.join(","),
                    format_elapsed(st.elapsed_s(crate::clock::now_ms())),
                    if st.is_running() {
                        "running".to_string()
                    } else {
                        exit_text(Some(st.exit_code), st.signal)
                    },
                ]
            })
            .collect();
        let head = ["STEP", "COMMAND", "TASKS", "NODES", "ELAPSED", "EXIT"];
        for line in table(&head, rows).lines() {
            out.push_str(&format!("\n  {line}"));
        }
    }
    if let Some(advice) = &d.advice {
        out.push_str(&format!("\nAdvice\n  {}", printable(advice)));
    }
    out
}

/// Runs `labpool cancel`, or with `--signal` sends the signal. Fails when any job was not
/// acted on.
pub async fn cancel(args: &crate::args::CancelJobArgs, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    let (out, verb): (Vec<CancelOutcome>, &str) = match args.signal_request()? {
        Some(req) => (client.post("/v1/jobs/signal", &req).await?, "signalled"),
        None => {
            let req = CancelRequest {
                ids: args.jobs.ids.clone(),
            };
            (client.post("/v1/jobs/cancel", &req).await?, "cancelled")
        }
    };
    let failed = report_outcomes(&out);
    if failed > 0 {
        anyhow::bail!("{failed} of {} jobs not {verb}", out.len());
    }
    Ok(())
}

/// Runs `labpool hold` (`hold`) or `labpool release`. Fails when any job was left as it was.
pub async fn hold(args: &CancelArgs, hold: bool, config: &Config) -> anyhow::Result<()> {
    let out: Vec<CancelOutcome> = Client::new(&config.controller.socket)
        .post(
            "/v1/jobs/hold",
            &crate::api::HoldRequest {
                ids: args.ids.clone(),
                hold,
            },
        )
        .await?;
    let failed = report_outcomes(&out);
    if failed > 0 {
        let verb = if hold { "held" } else { "released" };
        anyhow::bail!("{failed} of {} jobs not {verb}", out.len());
    }
    Ok(())
}

/// Runs `labpool requeue`. Fails when any job was not requeued.
pub async fn requeue(args: &CancelArgs, config: &Config) -> anyhow::Result<()> {
    let out: Vec<CancelOutcome> = Client::new(&config.controller.socket)
        .post(
            "/v1/jobs/requeue",
            &CancelRequest {
                ids: args.ids.clone(),
            },
        )
        .await?;
    let failed = report_outcomes(&out);
    if failed > 0 {
        anyhow::bail!("{failed} of {} jobs not requeued", out.len());
    }
    Ok(())
}

/// Runs `labpool update`.
pub async fn update(args: &crate::args::UpdateArgs, config: &Config) -> anyhow::Result<()> {
    let req = crate::api::UpdateRequest {
        id: args.id,
        time_limit: args.time.clone(),
        partition: args.partition.clone(),
        dependency: args.dependency.clone(),
        nodes: None,
    };
    let out: String = Client::new(&config.controller.socket)
        .post("/v1/jobs/update", &req)
        .await?;
    crate::out!("{out}");
    Ok(())
}

/// Prints each outcome, successes on stdout and failures on stderr; returns the failures.
fn report_outcomes(out: &[CancelOutcome]) -> usize {
    let mut failed = 0;
    for o in out {
        if o.ok {
            crate::out!("{}", o.message);
        } else {
            eprintln!("error: {}", o.message);
            failed += 1;
        }
    }
    failed
}

/// Runs `labpool history`.
pub async fn history(args: &HistoryArgs, config: &Config) -> anyhow::Result<()> {
    let since_ms = match &args.since {
        Some(since) => Some(parse_when(since, chrono::Local::now())?),
        None => None,
    };
    let jobs = Client::new(&config.controller.socket)
        .history(args.user.clone(), since_ms, args.limit as usize)
        .await?;
    // A member whose account was removed still has a history; a name that is nobody's and
    // has none is a typo, not "no jobs".
    if let Some(user) = &args.user
        && jobs.is_empty()
    {
        crate::args::values::login_name(user).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    print(args.json, &jobs, |jobs| {
        let rows = jobs
            .iter()
            .map(|j| {
                vec![
                    j.display_id(),
                    j.name.clone(),
                    j.user.clone(),
                    j.state.to_string(),
                    exit_text(j.exit_code, j.signal),
                    j.elapsed_s.map_or_else(|| "-".to_string(), format_elapsed),
                    // As in `queue`: GPUS is a count, the indexes go with the node.
                    gpus_asked(j),
                    match &j.node {
                        Some(node) if !j.gpus.is_empty() => {
                            format!("{node} [{}]", gpu_list(&j.gpus))
                        }
                        node => or_dash(node.as_ref()),
                    },
                    moment(j.end_time.as_deref()),
                    j.gpu_usage
                        .as_ref()
                        .map_or_else(|| "-".to_string(), |u| format!("{:.0}%", u.util_mean)),
                ]
            })
            .collect();
        let headers = [
            "JOBID", "NAME", "USER", "STATE", "EXIT", "ELAPSED", "GPUS", "NODE", "END", "GPU%",
        ];
        table(&headers, rows)
    });
    Ok(())
}
