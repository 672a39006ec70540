//! `scancel --signal` on the node: a signal to a running attempt's processes.

use super::Executor;
use crate::agent::jobdir::JobDir;

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
            SignalTarget::Steps => {
                crate::agent::procs::signal_job_processes(&dir.key(), sig, &[shell])
            }
            SignalTarget::All => crate::agent::procs::signal_job_processes(&dir.key(), sig, &[]),
        };
        tracing::info!(job, attempt, %sig, sent, "signal sent");
    }
}
