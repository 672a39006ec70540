//! Suspending an idle session: its node checkpoints its GPU state to host memory and its GPUs go
//! back to the pool while its processes live on; when its owner comes back and the scheduler
//! gives it its GPUs again, its node restores the state on them.

use crate::core::{Lifecycle, Tracked};
use crate::event::Effect;
use crate::transition::Transition;

impl<J: Tracked> Lifecycle<J> {
    /// `node` checkpointed `attempt` of `job`. Taken only for the running attempt on that node,
    /// holding GPUs, that nobody is stopping; a job being stopped dies with its checkpoint.
    pub(crate) fn suspended(
        &mut self,
        node: &str,
        job: u64,
        attempt: u32,
        now: i64,
        out: &mut Vec<Effect>,
    ) {
        let Some(life) = self.stoppable(job).filter(|l| {
            l.attempt == attempt
                && l.node.as_deref() == Some(node)
                && l.others.is_empty()
                && !l.gpus.is_empty()
                && !l.is_suspended()
        }) else {
            return;
        };
        let pause = crate::GpuPause {
            gpus: life.gpus.clone(),
            since: Some(now),
            paused_ms: life.pause.as_ref().map_or(0, |p| p.paused_ms),
        };
        self.commit(job, Transition::Suspended { pause }, out);
        out.push(Effect::Suspend { job });
    }

    /// The scheduler gave suspended `job` its GPUs again: its node restores it on them.
    pub(crate) fn resume(&mut self, job: u64, now: i64, out: &mut Vec<Effect>) {
        let Some((life, was)) = self.life(job).and_then(|l| {
            let p = l.pause.as_ref()?;
            (l.state == labpool_scheduler::JobState::Running).then_some((l, p))
        }) else {
            return;
        };
        let Some(since) = was.since else { return };
        let (attempt, node) = (life.attempt, life.node.clone().unwrap_or_default());
        let pause = crate::GpuPause {
            gpus: was.gpus.clone(),
            since: None,
            paused_ms: was.paused_ms + (now - since).max(0),
        };
        let gpus = pause.gpus.clone();
        self.commit(job, Transition::Resumed { pause, time: now }, out);
        out.push(Effect::Restore {
            job,
            attempt,
            node,
            gpus,
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::{Effect, Event, JobLife, Lifecycle, Placement, Readiness, Transition};
    use labpool_scheduler::JobState;

    fn running() -> Lifecycle {
        let mut life: Lifecycle = Lifecycle::new();
        life.admit(7, JobLife::pending(true));
        let placement = Placement {
            node: "gpu1".into(),
            gpus: vec![2],
            stdout: "/o".into(),
            stderr: "/o".into(),
            others: vec![],
            ports: None,
        };
        let ready = Readiness::Ready {
            isolation: "none".into(),
        };
        life.handle(
            Event::Placed {
                job: 7,
                placement,
                ready,
            },
            1_000,
        );
        life
    }

    #[test]
    fn a_checkpointed_session_gives_its_gpu_back_and_takes_the_same_one_again() {
        let mut life = running();
        // Another node's, or another attempt's, report is not taken.
        for (node, attempt) in [("gpu2", 1), ("gpu1", 2)] {
            let e = Event::Suspended {
                node: node.into(),
                job: 7,
                attempt,
            };
            assert!(life.handle(e, 2_000).is_empty());
        }
        let e = Event::Suspended {
            node: "gpu1".into(),
            job: 7,
            attempt: 1,
        };
        let out = life.handle(e.clone(), 2_000);
        assert_eq!(
            out,
            [
                Effect::Persist {
                    job: 7,
                    transition: Transition::Suspended {
                        pause: crate::GpuPause {
                            gpus: vec![2],
                            since: Some(2_000),
                            paused_ms: 0
                        }
                    }
                },
                Effect::Suspend { job: 7 }
            ]
        );
        let l = life.job(7).unwrap();
        assert!(l.gpus.is_empty());
        assert_eq!(l.state, JobState::Running);
        assert_eq!(l.reason.as_deref(), Some(crate::SUSPENDED));
        assert!(life.handle(e, 2_500).is_empty(), "suspended once");

        let out = life.handle(Event::Resume { job: 7 }, 5_000);
        assert_eq!(
            out[1],
            Effect::Restore {
                job: 7,
                attempt: 1,
                node: "gpu1".into(),
                gpus: vec![2]
            }
        );
        let l = life.job(7).unwrap();
        assert_eq!(l.gpus, [2]);
        assert_eq!(l.reason, None);
        assert_eq!(l.pause.as_ref().unwrap().paused_ms, 3_000);
        assert!(life.handle(Event::Resume { job: 7 }, 6_000).is_empty());
    }

    #[test]
    fn a_job_being_stopped_is_not_suspended() {
        let mut life = running();
        life.handle(
            Event::Cancel {
                job: 7,
                by: "alice".into(),
            },
            1_500,
        );
        let e = Event::Suspended {
            node: "gpu1".into(),
            job: 7,
            attempt: 1,
        };
        assert!(life.handle(e, 2_000).is_empty());
        assert_eq!(life.job(7).unwrap().gpus, [2]);
    }
}
