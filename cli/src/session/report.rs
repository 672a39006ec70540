//! A session's or a notebook's reports to the controller: every few seconds its host says
//! whether its member typed (a notebook: whether its kernels ran) since the last report, and
//! shows what the controller answers (the idle rule's warning; see
//! `labpool_controller::health::idle`) on the terminal, or in the notebook job's output. The controller then decides when the
//! session is idle, from its GPUs and these reports. Where the controller cannot be reached
//! (the Slurm executor's nodes, a controller restarting for long), the host keeps its own rule:
//! no input for `[jobs] interactive_idle` ends the session.

use crate::api::sessions::{SessionReply, SessionReport};
use crate::client::Client;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// How often the host reports: a sixth of the idle limit, from half a second to 30 s.
pub fn every(idle: Duration) -> Duration {
    (idle / 6).clamp(Duration::from_millis(500), Duration::from_secs(30))
}

/// Starts reporting for job `job` to the controller at `socket`, in a thread of its own: each
/// report says whether `active` saw activity since the last one, and an answer's words go to
/// `notice`. Returns when the last report was answered (ms; 0: never).
pub fn start(
    socket: Option<PathBuf>,
    job: Option<u64>,
    idle: Duration,
    mut active: Box<dyn FnMut(&tokio::runtime::Runtime) -> bool + Send>,
    notice: Box<dyn Fn(&str) + Send>,
) -> Arc<AtomicI64> {
    let answered = Arc::new(AtomicI64::new(0));
    let (Some(socket), Some(job)) = (socket, job) else {
        return answered;
    };
    let out = answered.clone();
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        let client = Client::new(&socket);
        let path = format!("/v1/jobs/{job}/session/report");
        loop {
            let input = active(&rt);
            let reply: Result<SessionReply, _> =
                rt.block_on(client.post(&path, &SessionReport { input }));
            if let Ok(reply) = reply {
                answered.store(crate::clock::now_ms(), Ordering::Relaxed);
                if let Some(text) = reply.notice {
                    notice(&text);
                }
            }
            std::thread::sleep(every(idle));
        }
    });
    out
}

/// A session's activity: a key typed since the last report (`last_input`, ms, kept by its host).
pub fn typed_since(
    last_input: Arc<AtomicI64>,
) -> Box<dyn FnMut(&tokio::runtime::Runtime) -> bool + Send> {
    let mut reported = 0i64;
    Box::new(move |_| {
        let now = crate::clock::now_ms();
        let typed = last_input.load(Ordering::Relaxed) > reported;
        reported = now;
        typed
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn reports_come_a_sixth_of_the_idle_limit_apart_within_bounds() {
        use std::time::Duration;
        assert_eq!(
            super::every(Duration::from_secs(3600)),
            Duration::from_secs(30)
        );
        assert_eq!(
            super::every(Duration::from_secs(60)),
            Duration::from_secs(10)
        );
        assert_eq!(
            super::every(Duration::from_secs(1)),
            Duration::from_millis(500)
        );
    }
}
