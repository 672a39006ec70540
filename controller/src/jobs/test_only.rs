//! `--test-only`: a submit's checks, then the scheduler's own pass on a copy
//! ([`labpool_scheduler::Scheduler::test_only`]); nothing is queued or written.

use crate::api::SubmitRequest;
use crate::api::test_only::WouldStart;
use crate::clock::rfc3339;
use crate::engine::Engine;
use crate::error::ApiError;
use crate::identity::Caller;
use crate::jobs::submit::job_spec;
use labpool_scheduler::{JobId, Timestamp};

impl Engine {
    /// What a submit of `req` would make of it, and where and when it would start.
    pub(crate) async fn test_only(
        &mut self,
        req: &SubmitRequest,
        caller: &Caller,
    ) -> anyhow::Result<Result<WouldStart, ApiError>> {
        let accepted = match self.check_submit(req, caller).await? {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        };
        let now = self.clock.now_ms();
        let id = self.db.next_job_id().await?;
        // An array's first task stands for the array.
        let spec = job_spec(req, &caller.user, &accepted, JobId(id), None, now);
        let view = self.pass_cache_view();
        let p = self.sched.test_only(Timestamp(now), &view, spec);
        Ok(Ok(WouldStart {
            job_id: id,
            start_time: p.start.map(|t| rfc3339(t.0)),
            node: p.node,
            reason: p.reason.as_ref().map(|r| r.code.clone()),
            reason_detail: p.reason.map(|r| r.detail),
            partition: accepted.partition,
            account: accepted.account,
            nodes: req.node_count,
            tasks: req.ntasks,
            cpus: req.cpus.saturating_mul(req.node_count),
            gpus: req.gpus.saturating_mul(req.node_count),
            gpu_type: req.gpu_type.clone(),
            mem_mib: req.mem_mib.saturating_mul(u64::from(req.node_count)),
            time_limit_s: crate::api::limit_secs(accepted.time_limit),
        }))
    }
}
