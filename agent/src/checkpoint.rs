//! A job's GPU state, checkpointed to host memory and restored, with NVIDIA's `cuda-checkpoint`
//! (driver 550 or later): what lets an idle session give its GPU back to the pool without
//! losing its kernel's variables.
//!
//! For each process of the job that holds a CUDA context (`--get-state` answers `running`):
//! drivers from 570 on take the steps one at a time, `lock` then `checkpoint` to suspend and
//! `restore` then `unlock` to resume, every process locked before any is checkpointed so that
//! none waits on another mid-kernel; drivers 550 to 569 know only `--toggle`, which does both
//! steps of each. A step that fails puts back what was done, and the job is stopped instead.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one step of one process may take: a lock waits for the kernels in flight.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// A job of more processes than this is not suspended (each is asked whether it holds a CUDA
/// context).
const MAX_PROCESSES: usize = 256;

/// The oldest driver whose `cuda-checkpoint` works.
const FIRST_DRIVER: u32 = 550;

/// The first driver with separate lock, checkpoint, restore and unlock steps.
const STEPS_DRIVER: u32 = 570;

/// A node's way to checkpoint GPU state.
#[derive(Debug, Clone)]
pub struct Checkpointer {
    tool: PathBuf,
    driver: String,
    steps: bool,
}

impl Checkpointer {
    /// The node's `cuda-checkpoint` (`configured`, else the one on `PATH`), with the driver
    /// version NVML reports; `None`, with the reason logged, where either is missing or the
    /// driver is older than 550.
    pub fn detect(configured: Option<&Path>, driver: Option<String>) -> Option<Checkpointer> {
        let tool = configured
            .map(Path::to_path_buf)
            .or_else(|| labpool_envs::tools::which("cuda-checkpoint"))?;
        let Some(driver) = driver else {
            tracing::info!(
                tool = %tool.display(),
                "idle sessions are stopped, not suspended: NVML reports no driver version"
            );
            return None;
        };
        let major = driver_major(&driver)?;
        if major < FIRST_DRIVER {
            tracing::info!(
                driver,
                "idle sessions are stopped, not suspended: cuda-checkpoint needs driver {FIRST_DRIVER} or later"
            );
            return None;
        }
        Some(Checkpointer {
            tool,
            driver,
            steps: major >= STEPS_DRIVER,
        })
    }

    /// What it is, in words, for the node's registration and `labpool nodes`.
    pub fn describe(&self) -> String {
        format!(
            "{} (driver {}, {})",
            self.tool.display(),
            self.driver,
            if self.steps {
                "lock, checkpoint, restore, unlock"
            } else {
                "toggle"
            }
        )
    }

    /// The processes among `pids` that hold a CUDA context, in pid order; an error for a job
    /// of more than [`MAX_PROCESSES`] processes (none may be left out, so none is suspended).
    pub async fn cuda_processes(&self, pids: &[i32]) -> Result<Vec<i32>, String> {
        if pids.len() > MAX_PROCESSES {
            return Err(format!(
                "it runs {} processes; a job of more than {MAX_PROCESSES} is not suspended",
                pids.len()
            ));
        }
        Ok(self.in_state(pids, "running").await)
    }

    /// The processes among `pids` whose GPU state is checkpointed (after an agent restart,
    /// when the list it suspended is gone).
    pub async fn checkpointed(&self, pids: &[i32]) -> Vec<i32> {
        let asked = &pids[..pids.len().min(MAX_PROCESSES)];
        self.in_state(asked, "checkpointed").await
    }

    /// The processes among `pids` whose `--get-state` answers `state`, in pid order.
    async fn in_state(&self, pids: &[i32], state: &str) -> Vec<i32> {
        let mut sorted: Vec<i32> = pids.to_vec();
        sorted.sort_unstable();
        let mut out = Vec::new();
        for pid in sorted {
            if let Ok(said) = self.call(&with_pid(&["--get-state"], pid)).await
                && said.trim() == state
            {
                out.push(pid);
            }
        }
        out
    }

    /// Moves the GPU state of `pids` to host memory. On an error, what was done is put back.
    pub async fn suspend(&self, pids: &[i32]) -> Result<(), String> {
        if !self.steps {
            return self.each(pids, &["--toggle"], &["--toggle"]).await;
        }
        self.each(pids, &["--action", "lock"], &["--action", "unlock"])
            .await?;
        if let Err(e) = self
            .each(pids, &["--action", "checkpoint"], &["--action", "restore"])
            .await
        {
            self.undo(pids, &["--action", "unlock"]).await;
            return Err(e);
        }
        Ok(())
    }

    /// Brings the GPU state of `pids` back onto their GPUs and lets them run.
    pub async fn resume(&self, pids: &[i32]) -> Result<(), String> {
        if !self.steps {
            return self.each(pids, &["--toggle"], &["--toggle"]).await;
        }
        self.each(pids, &["--action", "restore"], &["--action", "checkpoint"])
            .await?;
        self.each(pids, &["--action", "unlock"], &["--action", "lock"])
            .await
    }

    /// `step` for each of `pids` in order; on a failure, `undo` for those it was done to.
    async fn each(&self, pids: &[i32], step: &[&str], undo: &[&str]) -> Result<(), String> {
        for (i, pid) in pids.iter().enumerate() {
            if let Err(e) = self.call(&with_pid(step, *pid)).await {
                self.undo(&pids[..i], undo).await;
                return Err(format!("{} for process {pid}: {e}", step.join(" ")));
            }
        }
        Ok(())
    }

    /// `step` for each of `pids`, in reverse order, errors logged.
    async fn undo(&self, pids: &[i32], step: &[&str]) {
        for pid in pids.iter().rev() {
            if let Err(e) = self.call(&with_pid(step, *pid)).await {
                tracing::warn!(pid, "cannot undo with {}: {e}", step.join(" "));
            }
        }
    }

    /// Runs the tool; its standard output, or what went wrong.
    async fn call(&self, args: &[String]) -> Result<String, String> {
        let run = tokio::process::Command::new(&self.tool)
            .args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(STEP_TIMEOUT, run)
            .await
            .map_err(|_| {
                format!(
                    "{} did not answer within {STEP_TIMEOUT:?}",
                    self.tool.display()
                )
            })?
            .map_err(|e| format!("cannot run {}: {e}", self.tool.display()))?;
        let text = |b: &[u8]| {
            let t = String::from_utf8_lossy(b);
            t.chars().take(500).collect::<String>()
        };
        if out.status.success() {
            Ok(text(&out.stdout))
        } else {
            Err(format!(
                "{} {} failed ({}): {}",
                self.tool.display(),
                args.join(" "),
                out.status,
                text(&out.stderr).trim()
            ))
        }
    }
}

/// The tool's arguments for `step` on process `pid`.
fn with_pid(step: &[&str], pid: i32) -> Vec<String> {
    step.iter()
        .map(|a| a.to_string())
        .chain(["--pid".to_string(), pid.to_string()])
        .collect()
}

/// The major number of a driver version (`570` of `570.86.15`).
fn driver_major(version: &str) -> Option<u32> {
    version.split('.').next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drivers_before_550_have_no_checkpoint_and_570_takes_steps() {
        let tool = Path::new("/bin/true");
        let at = |v: &str| Checkpointer::detect(Some(tool), Some(v.to_string()));
        assert!(at("535.183.01").is_none());
        assert!(!at("550.54.14").unwrap().steps);
        assert!(at("570.86.15").unwrap().steps);
        assert!(at("garbage").is_none());
        assert!(Checkpointer::detect(Some(tool), None).is_none());
    }
}
