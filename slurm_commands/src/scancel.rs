//! `scancel`: jobs by id, or every job matching `-u`, `-t`, `-n`, `-p`, `-A` (your own, unless
//! you are an admin). Like scancel it prints nothing when all went well.

use crate::api::{CancelOutcome, CancelRequest, JobView, SignalRequest, SignalTarget};
use crate::client::Client;

/// scancel's options.
#[derive(clap::Parser, Debug)]
#[command(name = "scancel", no_binary_name = true, infer_long_args = true)]
pub struct ScancelArgs {
    /// Only this user's jobs
    #[arg(short = 'u', long = "user")]
    user: Option<String>,
    /// Only my jobs (as -u with my name)
    #[arg(long = "me", conflicts_with = "user")]
    me: bool,
    /// Only jobs in this state (PENDING, RUNNING)
    #[arg(short = 't', long = "state")]
    state: Option<String>,
    /// Only jobs of this name
    #[arg(short = 'n', long = "name", alias = "jobname")]
    name: Option<String>,
    /// Only jobs in this partition
    #[arg(short = 'p', long = "partition")]
    partition: Option<String>,
    /// Only jobs of this account
    #[arg(short = 'A', long = "account")]
    account: Option<String>,
    /// Send this signal instead of cancelling; the job goes on running
    #[arg(short = 's', long = "signal")]
    signal: Option<String>,
    /// With --signal: the batch shell alone
    #[arg(short = 'b', long = "batch")]
    batch: bool,
    /// With --signal: every process of the job, the batch shell included
    #[arg(short = 'f', long = "full")]
    full: bool,
    /// Job ids (12, or 12_3 for one array task)
    ids: Vec<String>,
}

/// Runs scancel against the controller.
pub async fn scancel(client: &Client, a: &ScancelArgs) -> anyhow::Result<String> {
    let me = a.me.then(super::whoami);
    let user = a.user.clone().or(me);
    let filtered = user.is_some()
        || a.state.is_some()
        || a.name.is_some()
        || a.partition.is_some()
        || a.account.is_some();
    // With a filter, only the jobs that pass it (of those named, when ids are given too).
    let mut ids = if filtered { Vec::new() } else { a.ids.clone() };
    if filtered {
        let jobs: Vec<JobView> = client.get("/v1/jobs").await?;
        let is = |want: &Option<String>, v: &str| want.as_deref().is_none_or(|w| w == v);
        ids.extend(
            jobs.iter()
                .filter(|j| {
                    let (long, short) = super::squeue::state_names(j.state);
                    let state = a.state.as_deref().map(str::to_ascii_uppercase);
                    is(&user, &j.user)
                        && state.as_deref().is_none_or(|s| s == long || s == short)
                        && is(&a.name, &j.name)
                        && is(&a.partition, &j.partition)
                        && is(&a.account, j.account.as_deref().unwrap_or(""))
                        && (a.ids.is_empty()
                            || a.ids.contains(&j.id.to_string())
                            || a.ids.contains(&j.display_id())
                            || j.array_id.is_some_and(|x| a.ids.contains(&x.to_string())))
                })
                .map(|j| j.id.to_string()),
        );
    }
    if ids.is_empty() {
        if !filtered {
            anyhow::bail!("no job identification provided");
        }
        return Ok(String::new());
    }
    ids.sort();
    ids.dedup();
    let out: Vec<CancelOutcome> = match &a.signal {
        Some(s) => {
            let spec =
                labpool_scheduler::options::parse_signal(s).map_err(|e| anyhow::anyhow!(e))?;
            let target = match (a.batch, a.full) {
                (true, _) => SignalTarget::Batch,
                (_, true) => SignalTarget::All,
                _ => SignalTarget::Steps,
            };
            let req = SignalRequest {
                ids,
                signal: spec.signal,
                target,
            };
            client.post("/v1/jobs/signal", &req).await?
        }
        None => {
            client
                .post("/v1/jobs/cancel", &CancelRequest { ids })
                .await?
        }
    };
    // A job a filter chose that ended meanwhile (a cancel already under way) is no error:
    // it is gone, as asked.
    let failed: Vec<String> = out
        .iter()
        .filter(|o| !o.ok)
        .filter(|o| a.ids.contains(&o.id) || !o.message.contains("already ended"))
        .map(|o| {
            // Slurm's words for an id it never had.
            let why = if o.message == format!("no job {}", o.id) {
                "Invalid job id specified"
            } else {
                o.message.as_str()
            };
            format!("Kill job error on job id {}: {why}", o.id)
        })
        .collect();
    if failed.is_empty() {
        Ok(String::new())
    } else {
        anyhow::bail!("{}", failed.join("\n"))
    }
}
