//! Slurm's commands as the gate runs them: `sbatch`, `scontrol`, `scancel` and `squeue`, from
//! `[executor] slurm_bin`, with `SLURM_CONF` from `[executor] slurm_conf`.

use crate::slurm_gate::node::NodeLine;
use crate::slurm_gate::queue::{self, QueueError, SlurmJob};
use crate::slurm_gate::submit::{self, Submission};
use std::path::PathBuf;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;

/// Why a Slurm command did not do its work.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// It could not be started.
    #[error("cannot run {command}: {source} (check slurm_bin under [executor])")]
    Spawn {
        /// The command.
        command: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// It ran and failed.
    #[error("{command} failed ({status}): {stderr}")]
    Failed {
        /// The command and its first arguments.
        command: String,
        /// Its exit status.
        status: String,
        /// What it wrote on stderr.
        stderr: String,
    },
    /// sbatch answered something other than a job id.
    #[error("sbatch --parsable answered {0:?}, not a job id")]
    NoJobId(String),
    /// squeue's answer.
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl SlurmError {
    /// True when Slurm could not be reached (slurmctld restarting, a timeout) rather than
    /// refusing what was asked: worth trying again.
    pub fn is_transient(&self) -> bool {
        match self {
            SlurmError::Failed { stderr, .. } => [
                "Unable to contact slurm controller",
                "Socket timed out",
                "Connection refused",
                "Zero Bytes were transmitted",
                "Slurm temporarily unable",
            ]
            .iter()
            .any(|m| stderr.contains(m)),
            _ => false,
        }
    }
}

/// Where Slurm's commands are and which cluster they talk to.
#[derive(Debug, Clone)]
pub struct Slurm {
    /// The directory of the commands.
    pub bin: PathBuf,
    /// `SLURM_CONF`, when set.
    pub conf: Option<PathBuf>,
}

impl Slurm {
    fn command(&self, name: &str) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(self.bin.join(name));
        if let Some(conf) = &self.conf {
            c.env("SLURM_CONF", conf);
        }
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    /// Runs `name args`, giving `input` on stdin; its stdout when it succeeded.
    async fn run(
        &self,
        mut c: tokio::process::Command,
        name: &str,
        args: &[String],
        input: Option<&str>,
    ) -> Result<Vec<u8>, SlurmError> {
        let shown = format!(
            "{name} {}",
            args.iter().take(3).cloned().collect::<Vec<_>>().join(" ")
        );
        c.args(args);
        if input.is_some() {
            c.stdin(Stdio::piped());
        }
        let mut child = c.spawn().map_err(|source| SlurmError::Spawn {
            command: self.bin.join(name).display().to_string(),
            source,
        })?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            let _ = stdin.write_all(text.as_bytes()).await;
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|source| SlurmError::Spawn {
                command: shown.clone(),
                source,
            })?;
        if !out.status.success() {
            return Err(SlurmError::Failed {
                command: shown,
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(out.stdout)
    }

    /// Submits one attempt of `pool` held; Slurm's job id.
    pub async fn submit_held(
        &self,
        s: &Submission,
        as_root: bool,
        pool: &str,
    ) -> Result<u64, SlurmError> {
        let mut c = self.command("sbatch");
        c.env_clear();
        if let Some(conf) = &self.conf {
            c.env("SLURM_CONF", conf);
        }
        c.envs(submit::environment(s));
        let args = submit::sbatch_args(s, as_root, pool);
        let out = self
            .run(c, "sbatch", &args, Some(&submit::wrapper(s)))
            .await?;
        let text = String::from_utf8_lossy(&out).trim().to_string();
        // `--parsable` writes `ID` or `ID;CLUSTER`.
        text.split(';')
            .next()
            .and_then(|id| id.parse().ok())
            .ok_or(SlurmError::NoJobId(text))
    }

    /// Releases held jobs.
    pub async fn release(&self, ids: &[u64]) -> Result<(), SlurmError> {
        let args = vec!["release".to_string(), id_list(ids)];
        self.run(self.command("scontrol"), "scontrol", &args, None)
            .await
            .map(drop)
    }

    /// Cancels jobs.
    pub async fn cancel(&self, ids: &[u64]) -> Result<(), SlurmError> {
        let args: Vec<String> = ids.iter().map(u64::to_string).collect();
        self.run(self.command("scancel"), "scancel", &args, None)
            .await
            .map(drop)
    }

    /// Sends `signal` to a job's processes: `which` is scancel's `--batch`/`--full` or none.
    pub async fn signal(
        &self,
        id: u64,
        signal: i32,
        which: Option<&str>,
    ) -> Result<(), SlurmError> {
        let mut args = vec![format!("--signal={signal}")];
        args.extend(which.map(str::to_string));
        args.push(id.to_string());
        self.run(self.command("scancel"), "scancel", &args, None)
            .await
            .map(drop)
    }

    /// The whole queue.
    pub async fn queue(&self) -> Result<Vec<SlurmJob>, SlurmError> {
        let out = self
            .run(
                self.command("squeue"),
                "squeue",
                &["--json".to_string()],
                None,
            )
            .await?;
        Ok(queue::parse(&out)?)
    }

    /// Jobs in accounting that ended in the last `days` days (all users'), from `sacct`.
    pub async fn accounting(&self, days: u32) -> Result<Vec<SlurmJob>, SlurmError> {
        let mut c = self.command("sacct");
        c.env("SLURM_TIME_FORMAT", "%s");
        let args = [
            "-X",
            "-P",
            "--noheader",
            "-a",
            "-S",
            &format!("now-{days}days"),
            "-o",
            crate::slurm_gate::accounting::FORMAT,
        ]
        .map(String::from);
        let out = self.run(c, "sacct", &args, None).await?;
        Ok(crate::slurm_gate::accounting::parse(
            &String::from_utf8_lossy(&out),
        ))
    }

    /// Sets a node's available and active features.
    pub async fn set_features(&self, node: &str, features: &[String]) -> Result<(), SlurmError> {
        let list = features.join(",");
        let args = [
            "update".to_string(),
            format!("NodeName={node}"),
            format!("AvailableFeatures={list}"),
            format!("ActiveFeatures={list}"),
        ];
        self.run(self.command("scontrol"), "scontrol", &args, None)
            .await
            .map(drop)
    }

    /// `scontrol show config`, as `Key = Value` pairs.
    pub async fn show_config(
        &self,
    ) -> Result<std::collections::BTreeMap<String, String>, SlurmError> {
        let args = ["show", "config"].map(String::from);
        let out = self
            .run(self.command("scontrol"), "scontrol", &args, None)
            .await?;
        Ok(crate::slurm_gate::doctor::config_values(
            &String::from_utf8_lossy(&out),
        ))
    }

    /// Every node's state and reason, from `scontrol show node -o`.
    pub async fn nodes(&self) -> Result<Vec<NodeLine>, SlurmError> {
        let args = ["show", "node", "-o"].map(String::from);
        let out = self
            .run(self.command("scontrol"), "scontrol", &args, None)
            .await?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter_map(NodeLine::parse)
            .collect())
    }
}

/// `1,2,3`.
fn id_list(ids: &[u64]) -> String {
    ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}
