//! The session host's reports to the controller: every few seconds it says whether its member
//! typed since the last report, and shows on the terminal what the controller answers (the idle
//! rule's warning; see `labpool_controller::health::idle`). The controller then decides when the
//! session is idle, from its GPUs and these reports. Where the controller cannot be reached
//! (the Slurm executor's nodes, a controller restarting for long), the host keeps its own rule:
//! no input for `[jobs] interactive_idle` ends the session.

use super::screen::Screen;
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

/// Starts reporting for job `job` to the controller at `socket`, in a thread of its own;
/// returns when the last report was answered (ms; 0: never).
pub fn start(
    socket: Option<PathBuf>,
    job: Option<u64>,
    idle: Duration,
    last_input: Arc<AtomicI64>,
    screen: Arc<Screen>,
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
        let mut reported = 0i64;
        loop {
            let now = crate::clock::now_ms();
            let input = last_input.load(Ordering::Relaxed) > reported;
            let reply: Result<SessionReply, _> =
                rt.block_on(client.post(&path, &SessionReport { input }));
            if let Ok(reply) = reply {
                reported = now;
                answered.store(now, Ordering::Relaxed);
                if let Some(text) = reply.notice {
                    screen.notice(&text);
                }
            }
            std::thread::sleep(every(idle));
        }
    });
    out
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
