//! `scancel --signal` on the node: a signal to a running attempt's processes.

use super::Executor;
use crate::jobdir::JobDir;

impl Executor {
    /// Sends `signal` to an attempt's batch shell, its other processes, or all of them.
    pub(super) fn signal(
        &self,
        job: u64,
        attempt: u32,
        signal: i32,
        target: crate::api::SignalTarget,
    ) {
        use crate::api::SignalTarget;
        use nix::sys::signal::Signal;
        let dir = JobDir::new(&self.spool, job, attempt);
        let (Ok(sig), Some(started)) = (Signal::try_from(signal), dir.started()) else {
            tracing::warn!(
                job,
                attempt,
                signal,
                "signal for an attempt not running here"
            );
            return;
        };
        let shell = nix::unistd::Pid::from_raw(started.pgid);
        let sent = match target {
            SignalTarget::Batch => usize::from(nix::sys::signal::kill(shell, sig).is_ok()),
            SignalTarget::Steps => crate::procs::signal_step_tasks(&dir.key(), sig, shell),
            SignalTarget::All => crate::procs::signal_job_processes(&dir.key(), sig, &[]),
        };
        tracing::info!(job, attempt, %sig, sent, "signal sent");
    }
}

/// Where a preempted attempt finds its notice: in its user's corner of the job directory.
pub(super) fn notice_path(dir: &JobDir) -> std::path::PathBuf {
    dir.user_dir().join("preempt-notice")
}

impl Executor {
    /// Preempts an attempt: writes its notice file, sends its `--signal` (TERM to all of its
    /// processes when it asked for none), and stops it as a cancel does once `grace_ms` has
    /// passed, unless it has ended by then.
    pub(super) fn notice(
        &self,
        job: u64,
        attempt: u32,
        by: u64,
        signal: Option<labpool_scheduler::options::SignalSpec>,
        grace_ms: u64,
    ) {
        use crate::api::SignalTarget;
        let dir = JobDir::new(&self.spool, job, attempt);
        let text = format!(
            "preempted for {}: save your work and exit; the job is stopped in {} s and requeued\n",
            labpool_lifecycle::preemptor(by),
            grace_ms / 1000
        );
        if let Err(e) =
            crate::jobdir::write_atomic(&notice_path(&dir), text.as_bytes(), 0o644, false)
        {
            tracing::warn!(job, attempt, "cannot write the preemption notice: {e}");
        }
        let (number, target) = match signal {
            Some(s) if s.batch_only => (s.signal, SignalTarget::Batch),
            Some(s) => (s.signal, SignalTarget::Steps),
            None => (nix::libc::SIGTERM, SignalTarget::All),
        };
        tracing::info!(job, attempt, by, grace_ms, "preemption notice");
        self.signal(job, attempt, number, target);
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(grace_ms)).await;
            if JobDir::new(&me.spool, job, attempt).status().is_none() {
                me.kill(job, attempt);
            }
        });
    }
}
