//! Every check a submit passes, in one place and in the order they run. A check that fails
//! changes nothing and answers with what was wrong and what to do.
//!
//! Two steps, because two kinds of state are read:
//! 1. [`before_engine`], in the API handler: what could never start ([`exec_problems`]: NUL
//!    bytes, arguments or variables longer than the kernel passes), the script's `CUDA_VISIBLE_DEVICES` lines, the
//!    environment it names, and the caller's quota. They query their own tables, so they run
//!    beside the engine and never stall its loop.
//! 2. [`Engine::check_submit`], in the engine's batch: everything that depends on the queue,
//!    the datasets and the ledger, checked against the state the batch's earlier submits left,
//!    so limits and tokens hold across a batch.

use crate::api::SubmitRequest;
use crate::clock::month_of;
use crate::engine::Engine;
use crate::error::ApiError;
use crate::http::AppState;
use crate::identity::{Caller, user_name};
use crate::jobs::submit::resources_of;
use labpool_scheduler::admission::AdmitRequest;
use labpool_scheduler::array::parse_array;
use labpool_scheduler::credits::NoTokens;
use labpool_scheduler::dependency::{Dependency, parse_dependencies};
use labpool_scheduler::options::check_name;
use labpool_scheduler::{JobId, JobState, TimeLimit};
use labpool_units::format_size;

/// A submit that passed every check.
pub(crate) struct Accepted {
    pub partition: String,
    pub time_limit: TimeLimit,
    pub account: Option<String>,
    pub tasks: Option<(Vec<u32>, Option<u32>)>,
    pub dependencies: Vec<Dependency>,
    /// What the member should know: datasets that are streamed.
    pub warnings: Vec<String>,
}

/// Longest single argument or `KEY=VALUE` the kernel passes to a program (`MAX_ARG_STRLEN`).
const MAX_EXEC_STRING: usize = 128 << 10;

/// Most bytes of arguments and environment a job may bring: the kernel's limit is a quarter of
/// the stack limit (2 MiB by default), and labpool adds variables of its own.
const MAX_EXEC_TOTAL: usize = 1 << 20;

/// What would make the job fail to start however long it waited: a NUL byte where the kernel
/// takes C strings (working directory, output paths, arguments, environment), a variable name
/// that is empty or holds `=`, an argument or variable longer than the kernel passes, or more
/// of them than it passes in all. Every problem is named, not just the first.
pub fn exec_problems(req: &SubmitRequest) -> Vec<String> {
    let mut problems = Vec::new();
    let nul = |what: &str, text: &str, out: &mut Vec<String>| {
        if let Some(at) = text.find('\0') {
            out.push(format!("{what} holds a NUL byte (at byte {at})"));
        }
    };
    nul(
        "the working directory",
        &req.workdir.to_string_lossy(),
        &mut problems,
    );
    nul("the job name", &req.name, &mut problems);
    for (what, path) in [("--output", &req.output), ("--error", &req.error)] {
        if let Some(p) = path {
            nul(what, p, &mut problems);
        }
    }
    let mut total = 0;
    for (i, arg) in req.args.iter().enumerate() {
        nul(&format!("argument {}", i + 1), arg, &mut problems);
        if arg.len() >= MAX_EXEC_STRING {
            problems.push(format!(
                "argument {} is {} long; the kernel passes at most {} per argument",
                i + 1,
                format_size(arg.len() as u64),
                format_size(MAX_EXEC_STRING as u64)
            ));
        }
        total += arg.len() + 1;
    }
    for (key, value) in &req.environment {
        let shown: String = key.chars().take(40).collect();
        if key.is_empty() || key.contains('=') {
            problems.push(format!(
                "environment variable {shown:?}: a name must be non-empty and hold no '='"
            ));
        }
        nul(
            &format!("environment variable {shown:?}"),
            key,
            &mut problems,
        );
        nul(&format!("the value of {shown}"), value, &mut problems);
        let len = key.len() + 1 + value.len();
        if len >= MAX_EXEC_STRING {
            problems.push(format!(
                "{shown}={}... is {} long; the kernel passes at most {} per variable",
                value.chars().take(10).collect::<String>(),
                format_size(len as u64),
                format_size(MAX_EXEC_STRING as u64)
            ));
        }
        total += len + 1;
    }
    if total > MAX_EXEC_TOTAL {
        problems.push(format!(
            "the arguments and environment hold {} in all; a job may bring at most {}",
            format_size(total as u64),
            format_size(MAX_EXEC_TOTAL as u64)
        ));
    }
    problems
}

/// The checks that read the environments' and quotas' tables. Fills in the environment the
/// request names; returns the warnings to pass on (a `CUDA_VISIBLE_DEVICES` line under
/// `warn`, a quota near its limit).
pub(crate) async fn before_engine(
    state: &AppState,
    req: &mut SubmitRequest,
    caller: &Caller,
) -> Result<Vec<String>, ApiError> {
    let problems = exec_problems(req);
    if !problems.is_empty() {
        return Err(ApiError::bad_request(
            format!(
                "the job could never start: {}",
                problems.join("; ")
            ),
            Some(
                "remove NUL bytes and pass large data in a file the job reads, not in its arguments or environment"
                    .to_string(),
            ),
        ));
    }
    let fields = super::fields::field_problems(req, state.config.jobs.interactive_idle);
    if !fields.is_empty() {
        return Err(ApiError::bad_request(
            format!("the job was not queued: {}", fields.join("; ")),
            Some("change the options named and submit again".to_string()),
        ));
    }
    let mut warnings = state.envs.check_submit(req, caller).await?;
    crate::models::submit::resolve(state, req, caller).await?;
    warnings.extend(state.quotas.submit_check(caller).await?);
    warnings.extend(crate::health::mail::mail_warnings(
        &state.config,
        req,
        &caller.user,
    ));
    Ok(warnings)
}

impl Engine {
    /// The checks that read the engine's state: the caller may submit here, the request is
    /// well formed, its datasets exist and fit a node's cache, its array and dependencies
    /// parse and exist, the partition, account and QOS limits admit it
    /// ([`labpool_scheduler::Scheduler::admit`]), and an emergency token is left.
    pub(crate) async fn check_submit(
        &mut self,
        req: &SubmitRequest,
        caller: &Caller,
    ) -> anyhow::Result<Result<Accepted, ApiError>> {
        let bad = |msg: String, hint: Option<&str>| {
            Ok(Err(ApiError::bad_request(msg, hint.map(str::to_string))))
        };
        if self.controller_uid != 0 && caller.uid != self.controller_uid {
            let me = user_name(self.controller_uid);
            return Ok(Err(ApiError::forbidden(
                format!(
                    "this controller runs as {me}, not root, so it runs only {me}'s jobs; {} cannot submit here",
                    caller.user
                ),
                Some("run `labpool serve` as root to serve every user".to_string()),
            )));
        }
        if !req.workdir.is_absolute() {
            return bad(
                format!("workdir {} is not an absolute path", req.workdir.display()),
                None,
            );
        }
        if let Err(e) = check_name(&req.name) {
            return bad(e.to_string(), None);
        }
        if !req.script.starts_with("#!") {
            return bad(
                "the script does not start with '#!'".into(),
                Some("add an interpreter line such as #!/bin/bash"),
            );
        }
        if req.cpus == 0 {
            return bad("cpus must be at least 1".into(), None);
        }
        if req.gpus == 0 && req.gpu_type.is_some() {
            return bad(
                "gpu_type is set but gpus is 0".into(),
                Some("ask for --gpus TYPE:N"),
            );
        }
        for d in &req.datasets {
            if let Err(e) = labpool_cache::registry::check_name(d) {
                return bad(e.to_string(), None);
            }
            if !self.data.datasets.contains_key(d) {
                let hint = crate::datasets::registry::registered_hint(
                    self.data.datasets.keys().map(String::as_str),
                );
                return Ok(Err(ApiError::bad_request(
                    format!("unknown dataset {d:?}"),
                    Some(hint),
                )));
            }
        }
        // A dataset larger than every node's cache is streamed (and said so); the others must
        // fit one cache together, or they could never be staged: refused now, not queued
        // forever.
        self.data.load_current(&req.datasets);
        let warnings = self.data.stream_notes(&req.datasets);
        if let Some(largest) = self.data.largest_cache() {
            let mut total = 0;
            let staged: Vec<&String> = req
                .datasets
                .iter()
                .filter(|d| !self.data.streamed(d))
                .collect();
            for d in staged {
                let current = self.data.datasets[d].current.clone();
                total += self.data.manifest(d, &current).map_or(0, |m| m.bytes());
            }
            if total > largest {
                return bad(
                    format!(
                        "the job's datasets ({}) hold {}, more than the largest node cache ({})",
                        req.datasets.join(", "),
                        labpool_units::format_size(total),
                        labpool_units::format_size(largest)
                    ),
                    Some("ask an admin to raise capacity under [cache], or split the dataset"),
                );
            }
        }
        let tasks = match req.array.as_deref().map(parse_array).transpose() {
            Ok(t) => t.map(|a| (a.tasks, a.throttle)),
            Err(e) => return bad(e.to_string(), None),
        };
        if tasks.is_some() && req.emergency {
            return bad(
                "an emergency job cannot be an array".into(),
                Some("spend the token on the one job that must run first"),
            );
        }
        let dependencies = match req
            .dependency
            .as_deref()
            .map(parse_dependencies)
            .transpose()
        {
            Ok(d) => d.unwrap_or_default(),
            Err(e) => return bad(e.to_string(), None),
        };
        // As in Slurm, a dependency on an array's id is on every one of its tasks.
        let mut expanded = Vec::new();
        for dep in &dependencies {
            let tasks = self.db.array_tasks(dep.job.0).await?;
            if tasks.len() > 1 {
                expanded.extend(tasks.into_iter().map(|(id, _)| Dependency {
                    kind: dep.kind,
                    job: JobId(id),
                }));
            } else {
                expanded.push(*dep);
            }
        }
        let dependencies = expanded;
        for dep in &dependencies {
            if self.jobs.contains(dep.job.0) {
                continue;
            }
            match self.db.job_state(dep.job.0).await? {
                // The scheduler learns outcomes as jobs end; a job that ended before this
                // controller started is learnt here.
                Some(state) => self
                    .sched
                    .note_outcome(dep.job, state == JobState::Completed),
                None => {
                    return bad(
                        format!("--dependency {dep}: there is no job {}", dep.job),
                        Some("`labpool queue` and `labpool history` list jobs"),
                    );
                }
            }
        }
        let resources = resources_of(req);
        let count = tasks.as_ref().map_or(1, |(t, _)| t.len() as u32);
        let admit = AdmitRequest {
            user: &caller.user,
            account: req.account.as_deref(),
            partition: req.partition.as_deref(),
            time_limit: req.time_limit,
            resources: &resources,
            nodes: &req.nodes,
            emergency: req.emergency,
            count,
        };
        let admitted = match self.sched.admit(&admit) {
            Ok(a) => a,
            Err(e) => return Ok(Err(ApiError::bad_request(e.to_string(), e.hint()))),
        };
        if let Some(deadline) = req.deadline_ms {
            let now = self.clock.now_ms();
            let start = req.begin_ms.unwrap_or(now).max(now);
            let limit = crate::api::limit_secs(admitted.time_limit);
            let end = limit.map(|s| start + s as i64 * 1000);
            if end.is_none_or(|e| e > deadline) {
                let when = crate::clock::when(deadline);
                let limit = limit.map_or_else(
                    || "UNLIMITED".to_string(),
                    |s| labpool_units::format_duration(std::time::Duration::from_secs(s)),
                );
                return bad(
                    format!(
                        "--deadline {when}: the job's time limit ({limit}) cannot end by then, even if it started now{}",
                        if req.begin_ms.is_some() {
                            " (or at its --begin time)"
                        } else {
                            ""
                        }
                    ),
                    Some("give a later --deadline or a shorter --time"),
                );
            }
        }
        if let Some(name) = &req.reservation {
            let probe = labpool_scheduler::JobSpec {
                user: caller.user.clone(),
                account: admitted.account.clone(),
                resources: resources.clone(),
                time_limit: admitted.time_limit,
                ..Default::default()
            };
            if let Err(e) = self.sched.check_reservation(&probe, name) {
                return bad(
                    e.to_string(),
                    Some("`labpool reservation list` shows the reservations and who may use them"),
                );
            }
        }
        if req.emergency && self.summary(&caller.user).tokens_left == 0 {
            let (_, _, _, reset) = month_of(self.clock.now_ms());
            let e = NoTokens {
                user: caller.user.clone(),
                allowed: self.sched.policy().credits.emergency_tokens,
                reset,
            };
            return Ok(Err(ApiError::bad_request(
                e.to_string(),
                Some("submit it without --emergency; it waits its turn".to_string()),
            )));
        }
        Ok(Ok(Accepted {
            partition: admitted.partition,
            time_limit: admitted.time_limit,
            account: admitted.account,
            tasks,
            dependencies,
            warnings,
        }))
    }
}
