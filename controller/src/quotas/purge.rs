//! The scratch purge: a plan first, kept for confirmation, then its execution with notices.

use crate::api::quotas::{PlannedFile, PurgeDone, PurgePlanView, UserTally};
use crate::clock::{now_ms, short};
use crate::error::ApiError;
use crate::identity::user_name;
use crate::quotas::QuotaService;
use labpool_quotas::purge::{PurgeContext, PurgePlan, PurgePolicy, Tally};
use labpool_quotas::{Progress, notice};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A purge plan is kept this long for `purge scratch` to execute after confirmation.
const PLAN_LIFETIME: Duration = Duration::from_secs(3600);

fn user_tallies(per: BTreeMap<u32, Tally>) -> Vec<UserTally> {
    let mut v: Vec<UserTally> = per
        .into_iter()
        .map(|(uid, tally)| UserTally {
            user: user_name(uid),
            uid,
            tally,
        })
        .collect();
    v.sort_by(|a, b| b.tally.bytes.cmp(&a.tally.bytes).then(a.uid.cmp(&b.uid)));
    v
}

impl QuotaService {
    /// Working directories of jobs not finished: the purge leaves them alone.
    async fn job_dirs(&self) -> Result<Vec<PathBuf>, ApiError> {
        Ok(self
            .db
            .active_jobs(None)
            .await
            .map_err(ApiError::internal)?
            .into_iter()
            .map(|j| j.request.workdir)
            .collect())
    }

    fn policy(&self) -> PurgePolicy {
        PurgePolicy {
            max_age: self.config.purge.max_age,
            warn: Duration::from_secs(u64::from(self.config.purge.warn_days) * 86_400),
            threads: self.config.quotas.scan_threads.unwrap_or(16),
        }
    }

    /// Makes a purge plan of scratch and keeps it for [`PLAN_LIFETIME`].
    pub async fn plan_purge(&self) -> Result<(String, PurgePlan), ApiError> {
        let fs = self.fs("scratch")?;
        let ctx = PurgeContext {
            now: now_ms() / 1000,
            protected: self.job_dirs().await?,
        };
        let policy = self.policy();
        let root = fs.root.clone();
        let plan = tokio::task::spawn_blocking(move || {
            labpool_quotas::purge::plan(&root, &policy, &ctx, &Progress::default())
        })
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| {
            ApiError::bad_request(
                format!("cannot plan the scratch purge: {e}"),
                Some("check [quotas.scratch] root in the config".into()),
            )
        })?;
        if let Some(note) = &plan.atime_note {
            tracing::warn!("purge: {note}");
        }
        let id = format!("{:x}", now_ms());
        let mut plans = self.plans.lock().unwrap();
        plans.retain(|_, (_, made)| made.elapsed() < PLAN_LIFETIME);
        plans.insert(id.clone(), (plan.clone(), Instant::now()));
        Ok((id, plan))
    }

    /// A plan as shown.
    pub fn view(id: &str, plan: &PurgePlan) -> PurgePlanView {
        PurgePlanView {
            id: id.to_string(),
            root: plan.root.clone(),
            max_age_days: plan.max_age_secs / 86_400,
            atime_note: plan.atime_note.clone(),
            per_user: user_tallies(plan.per_user()),
            total: plan.total(),
            oldest: plan
                .delete
                .iter()
                .take(20)
                .map(|c| PlannedFile {
                    path: plan.root.join(&c.path),
                    user: user_name(c.uid),
                    bytes: c.bytes,
                    age_days: c.age(plan.made) / 86_400,
                })
                .collect(),
            warned: user_tallies(
                plan.warned_per_user()
                    .into_iter()
                    .map(|(uid, v)| {
                        (
                            uid,
                            Tally {
                                files: v.len() as u64,
                                bytes: v.iter().map(|c| c.bytes).sum(),
                            },
                        )
                    })
                    .collect(),
            ),
            kept: plan.kept.clone(),
            jobs_skipped: plan.jobs_skipped.clone(),
            mounts_skipped: plan.mounts_skipped.clone(),
            errors: plan.errors.len(),
        }
    }

    /// Executes plan `id`: notices to the owners of files passing the limit soon, then the
    /// deletion of what is past it, one audit line per file.
    pub async fn execute_purge(&self, id: &str) -> Result<PurgeDone, ApiError> {
        let _one = self.purge_lock.lock().await;
        let plan = self
            .plans
            .lock()
            .unwrap()
            .remove(id)
            .map(|(p, _)| p)
            .ok_or_else(|| {
                ApiError::not_found(
                    format!("no purge plan {id}: it was executed already, or it is more than an hour old"),
                    Some("run `labpool purge scratch --dry-run` to make a new plan".into()),
                )
            })?;
        let notices = self.send_notices(&plan).await;
        let ctx = PurgeContext {
            now: now_ms() / 1000,
            protected: self.job_dirs().await?,
        };
        let log_path = self.config.controller.state_dir.join("purge-audit.log");
        let path = log_path.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            use std::os::unix::fs::OpenOptionsExt;
            let mut log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)
                .map_err(|e| labpool_quotas::QuotaError::io(&path, e))?;
            let out = labpool_quotas::purge::execute(&plan, &ctx, &mut log, &Progress::default());
            let _ = log.sync_all();
            out
        })
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| ApiError::internal(format!("the purge stopped: {e}")))?;
        let per_user = user_tallies(outcome.per_user());
        for u in &per_user {
            tracing::info!(user = %u.user, files = u.tally.files, bytes = u.tally.bytes, "purge removed");
        }
        for (path, why) in &outcome.skipped {
            tracing::info!(path = %path.display(), "purge left a planned file: {why}");
        }
        PurgeLast {
            at_ms: now_ms(),
            files: outcome.removed.len() as u64,
            bytes: outcome.removed.iter().map(|r| r.bytes).sum(),
        }
        .write(&self.config.controller.state_dir);
        Ok(PurgeDone {
            removed: Tally {
                files: outcome.removed.len() as u64,
                bytes: outcome.removed.iter().map(|r| r.bytes).sum(),
            },
            per_user,
            skipped: outcome.skipped,
            audit_log: log_path,
            notices,
        })
    }

    /// Writes each warned owner's notice in their home directory and posts it to the webhook.
    async fn send_notices(&self, plan: &PurgePlan) -> Vec<String> {
        let mut sent = Vec::new();
        let home = self.fs("home").ok();
        for (uid, files) in plan.warned_per_user() {
            let user = user_name(uid);
            let text = notice::notice_text(plan, &files, &|secs| {
                short(secs * 1000).chars().take(10).collect()
            });
            if let Some(home) = &home {
                let dir = home.user_dir(&user);
                let gid = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                    .ok()
                    .flatten()
                    .map_or(uid, |u| u.gid.as_raw());
                match notice::write_notice(&dir, uid, gid, &text) {
                    Ok(p) => sent.push(p.display().to_string()),
                    Err(e) => tracing::warn!(user = %user, "purge notice not written: {e}"),
                }
            }
            if let Some(url) = &self.config.alerts.webhook {
                let body = serde_json::json!({
                    "kind": "purge_notice",
                    "user": user,
                    "uid": uid,
                    "files": files.len(),
                    "bytes": files.iter().map(|c| c.bytes).sum::<u64>(),
                    "first_due": files.iter().map(|c| plan.due(c)).min(),
                    "text": text,
                });
                match crate::webhook::post(url, &body).await {
                    Ok(()) => sent.push(format!("{url} ({user})")),
                    Err(e) => tracing::warn!(user = %user, "purge notice not posted: {e:#}"),
                }
            }
        }
        sent
    }
}

/// The last purge's result, kept in `STATE_DIR/purge-last.json` for `/metrics` and reports.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PurgeLast {
    /// When it ran, ms.
    pub at_ms: i64,
    /// Files removed.
    pub files: u64,
    /// Bytes removed.
    pub bytes: u64,
}

impl PurgeLast {
    const FILE: &'static str = "purge-last.json";

    /// The last purge's result, if one was recorded.
    pub fn read(state_dir: &std::path::Path) -> Option<PurgeLast> {
        let text = std::fs::read_to_string(state_dir.join(Self::FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Records it (a failure is logged: only the figures on /metrics miss it).
    fn write(&self, state_dir: &std::path::Path) {
        let path = state_dir.join(Self::FILE);
        if let Err(e) = std::fs::write(&path, serde_json::to_vec(self).unwrap_or_default()) {
            tracing::warn!(
                "cannot record the purge's result in {}: {e}",
                path.display()
            );
        }
    }
}
