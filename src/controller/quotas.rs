//! Quotas in the controller: usage scans (on a schedule and on demand), the limits that apply
//! to a user, the decision at submit, the scratch purge (plan, then execute) with its notices,
//! and the datasets audit. The work itself is the `labpool-quotas` crate's.

use crate::clock::{now_ms, short};
use crate::controller::db::Db;
use crate::controller::error::ApiError;
use crate::controller::quota_db::{DEFAULT_USER, StoredScan};
use crate::identity::{Caller, user_name};
use crate::quota_api::{
    FsQuota, LimitRequest, LimitSet, LimitSource, PlannedFile, PurgeDone, PurgePlanView,
    ScanStatus, ScanSummary, UserQuota, UserTally,
};
use crate::settings::{Config, QuotaFs};
use labpool_quotas::audit::{AuditReport, Trusted};
use labpool_quotas::kernel::{self, Owner};
use labpool_quotas::limits::{Limit, Usage, evaluate, percent_used};
use labpool_quotas::purge::{PurgeContext, PurgePlan, PurgePolicy, Tally};
use labpool_quotas::scan::{ScanOptions, scan};
use labpool_quotas::size::{format_size, parse_count, parse_duration, parse_size};
use labpool_quotas::{Progress, notice};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A purge plan is kept this long for `purge scratch` to execute after confirmation.
const PLAN_LIFETIME: Duration = Duration::from_secs(3600);

/// The quota service, shared by the API and the timers.
pub struct QuotaService {
    /// The config.
    pub config: Arc<Config>,
    db: Db,
    scan: Mutex<ScanState>,
    scan_lock: tokio::sync::Mutex<()>,
    purge_lock: tokio::sync::Mutex<()>,
    plans: Mutex<BTreeMap<String, (PurgePlan, Instant)>>,
}

#[derive(Default)]
struct ScanState {
    status: ScanStatus,
    progress: Arc<Progress>,
}

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

/// Everything a quota is judged from, read once for one request.
struct Loaded {
    limits: BTreeMap<(String, String), Limit>,
    filesystems: Vec<LoadedFs>,
}

/// One file system's state: its last scan, since when each uid is over a soft limit, and how
/// limits on it are enforced.
struct LoadedFs {
    fs: QuotaFs,
    scan: Option<StoredScan>,
    grace: BTreeMap<u32, i64>,
    enforcement: kernel::Enforcement,
}

impl Loaded {
    /// One user's quotas at `now`.
    fn user_quota(&self, user: &str, uid: u32, now: i64) -> UserQuota {
        let mut filesystems = Vec::new();
        for LoadedFs {
            fs,
            scan,
            grace,
            enforcement,
        } in &self.filesystems
        {
            let (limit, limit_source) = QuotaService::effective(&self.limits, user, fs);
            let since = grace.get(&uid).copied();
            let (usage, apparent, top) = match scan {
                Some(s) => {
                    let u = s.report.users.get(&uid).copied().unwrap_or_default();
                    (
                        Some(Usage {
                            bytes: u.bytes,
                            files: u.files,
                        }),
                        Some(u.apparent),
                        s.report.top.get(&uid).cloned().unwrap_or_default(),
                    )
                }
                None => (None, None, Vec::new()),
            };
            let findings = usage
                .map(|u| evaluate(&limit, &u, since, now))
                .unwrap_or_default();
            filesystems.push(FsQuota {
                messages: findings.iter().map(|f| f.describe(&fs.name)).collect(),
                percent: usage.and_then(|u| percent_used(&limit, &u)),
                fs: fs.name.clone(),
                user_dir: fs.user_dir(user),
                root: fs.root.clone(),
                limit,
                limit_source,
                usage,
                apparent,
                scanned_at: scan.as_ref().map(|s| s.finished),
                over_soft_since: since,
                findings,
                top,
                enforcement: enforcement.describe(),
                by_kernel: enforcement.by_kernel(),
            });
        }
        let refused = filesystems
            .iter()
            .any(|f| f.findings.iter().any(|x| x.refuses()));
        let percent = filesystems
            .iter()
            .filter_map(|f| f.percent)
            .fold(None, |a: Option<f64>, p| Some(a.map_or(p, |a| a.max(p))));
        UserQuota {
            user: user.to_string(),
            uid,
            filesystems,
            refused,
            percent,
        }
    }
}

impl QuotaService {
    /// A service over `db`.
    pub fn new(config: Arc<Config>, db: Db) -> Arc<QuotaService> {
        Arc::new(QuotaService {
            config,
            db,
            scan: Mutex::new(ScanState::default()),
            scan_lock: tokio::sync::Mutex::new(()),
            purge_lock: tokio::sync::Mutex::new(()),
            plans: Mutex::new(BTreeMap::new()),
        })
    }

    /// The limited file systems.
    pub fn filesystems(&self) -> Vec<QuotaFs> {
        self.config.quota_filesystems().unwrap_or_default()
    }

    fn fs(&self, name: &str) -> Result<QuotaFs, ApiError> {
        self.filesystems()
            .into_iter()
            .find(|f| f.name == name)
            .ok_or_else(|| {
                ApiError::bad_request(
                    format!("no file system {name:?}: the limited ones are home and scratch"),
                    None,
                )
            })
    }

    fn scan_options(&self) -> ScanOptions {
        ScanOptions {
            threads: self.config.quotas.scan_threads.unwrap_or(16),
            ..ScanOptions::default()
        }
    }

    /// The limit that applies to `user` on `fs`, and where it comes from.
    fn effective(
        limits: &BTreeMap<(String, String), Limit>,
        user: &str,
        fs: &QuotaFs,
    ) -> (Limit, LimitSource) {
        if let Some(l) = limits.get(&(user.to_string(), fs.name.clone())) {
            return (*l, LimitSource::User);
        }
        if let Some(l) = limits.get(&(DEFAULT_USER.to_string(), fs.name.clone())) {
            return (*l, LimitSource::Default);
        }
        (fs.default_limit, LimitSource::Config)
    }

    /// What every user's quota is judged from, read once: limits, each file system's last
    /// scan, grace records, and how the kernel enforces.
    async fn load(&self) -> Result<Loaded, ApiError> {
        let mut loaded = Loaded {
            limits: self.db.quota_limits().await.map_err(ApiError::internal)?,
            filesystems: Vec::new(),
        };
        for fs in self.filesystems() {
            let scan = self
                .db
                .latest_quota_scan(&fs.name)
                .await
                .map_err(ApiError::internal)?;
            let grace = self
                .db
                .quota_grace(&fs.name)
                .await
                .map_err(ApiError::internal)?;
            let enforcement = kernel::detect(&fs.root);
            loaded.filesystems.push(LoadedFs {
                fs,
                scan,
                grace,
                enforcement,
            });
        }
        Ok(loaded)
    }

    /// One user's quotas now.
    pub async fn user_quota(&self, user: &str, uid: u32) -> Result<UserQuota, ApiError> {
        Ok(self.load().await?.user_quota(user, uid, now_ms()))
    }

    /// Every user seen by a scan or holding a limit, fullest first.
    pub async fn report(&self) -> Result<Vec<UserQuota>, ApiError> {
        let loaded = self.load().await?;
        let mut uids: BTreeSet<u32> = BTreeSet::new();
        for f in &loaded.filesystems {
            if let Some(s) = &f.scan {
                uids.extend(s.report.users.keys());
            }
        }
        for (user, _) in loaded.limits.keys() {
            if let Ok(Some(u)) = nix::unistd::User::from_name(user) {
                uids.insert(u.uid.as_raw());
            }
        }
        let now = now_ms();
        let mut out: Vec<UserQuota> = uids
            .into_iter()
            .map(|uid| loaded.user_quota(&user_name(uid), uid, now))
            .collect();
        out.sort_by(|a, b| {
            b.percent
                .unwrap_or(-1.0)
                .total_cmp(&a.percent.unwrap_or(-1.0))
                .then_with(|| a.user.cmp(&b.user))
        });
        Ok(out)
    }

    /// The submit check: `Err` refuses (with usage, limit, biggest directories and what to
    /// do), `Ok` carries warnings. Running jobs are never touched by quota.
    pub async fn submit_check(&self, caller: &Caller) -> Result<Vec<String>, ApiError> {
        let q = self.user_quota(&caller.user, caller.uid).await?;
        if !q.refused {
            return Ok(q
                .filesystems
                .iter()
                .flat_map(|f| f.messages.iter().map(|m| format!("quota: {m}")))
                .collect());
        }
        let mut msg = format!("{} is over quota; new jobs are refused:", caller.user);
        for f in &q.filesystems {
            for (finding, text) in f.findings.iter().zip(&f.messages) {
                if finding.refuses() {
                    msg.push_str(&format!("\n  {text}"));
                }
            }
            if f.findings.iter().any(|x| x.refuses()) && !f.top.is_empty() {
                let top: Vec<String> = f
                    .top
                    .iter()
                    .take(5)
                    .map(|d| format!("{} {}", d.path.display(), format_size(d.bytes)))
                    .collect();
                msg.push_str(&format!(
                    "\n  biggest directories on {}: {}",
                    f.fs,
                    top.join(", ")
                ));
            }
        }
        Err(ApiError::forbidden(
            msg,
            Some(format!(
                "delete or move files (`labpool quota` shows where the space is), then `labpool quota scan` counts again; or ask an admin to raise the limit (labpool quota set {} --fs FS --hard SIZE). Running jobs are not affected",
                caller.user
            )),
        ))
    }

    /// Sets a limit (an admin's request, already authorised).
    pub async fn set_limit(&self, req: LimitRequest, by: &str) -> Result<LimitSet, ApiError> {
        let bad = |e: labpool_quotas::QuotaError| ApiError::bad_request(e.to_string(), None);
        let fs = self.fs(&req.fs)?;
        let owner = match &req.user {
            Some(name) => {
                let u = nix::unistd::User::from_name(name)
                    .ok()
                    .flatten()
                    .ok_or_else(|| {
                        ApiError::bad_request(
                            format!("no user {name:?} on this machine"),
                            Some("check the name (getent passwd NAME); limits are set for existing accounts".into()),
                        )
                    })?;
                Some(Owner {
                    name: u.name,
                    uid: u.uid.as_raw(),
                    gid: u.gid.as_raw(),
                })
            }
            None => None,
        };
        let key = owner.as_ref().map_or(DEFAULT_USER, |o| o.name.as_str());
        let limits = self.db.quota_limits().await.map_err(ApiError::internal)?;
        let (mut limit, _) = Self::effective(&limits, key, &fs);
        if let Some(v) = &req.soft {
            limit.soft_bytes = parse_size(v).map_err(bad)?;
        }
        if let Some(v) = &req.hard {
            limit.hard_bytes = parse_size(v).map_err(bad)?;
        }
        if let Some(v) = &req.files_soft {
            limit.soft_files = parse_count(v).map_err(bad)?;
        }
        if let Some(v) = &req.files_hard {
            limit.hard_files = parse_count(v).map_err(bad)?;
        }
        if let Some(v) = &req.grace {
            limit.grace_secs = Some(parse_duration(v).map_err(bad)?.as_secs());
        }
        limit.validate().map_err(bad)?;
        let enforcement = kernel::detect(&fs.root);
        // The kernel first: a refusal there (a file where the directory belongs) changes nothing.
        let applied = match &owner {
            Some(o) => {
                let (enf, dir, o, l) =
                    (enforcement.clone(), fs.user_dir(&o.name), o.clone(), limit);
                tokio::task::spawn_blocking(move || kernel::apply(&enf, &dir, &o, &l))
                    .await
                    .map_err(ApiError::internal)?
                    .map_err(|e| {
                        ApiError::bad_request(
                            format!(
                                "the kernel limit could not be set, so nothing was changed: {e}"
                            ),
                            None,
                        )
                    })?
            }
            None => kernel::Applied {
                note: if enforcement.by_kernel() {
                    "a default is applied at submit; the kernel gets a user's limit when it is set for them (quota set)".into()
                } else {
                    enforcement.describe()
                },
                by_kernel: false,
            },
        };
        self.db
            .set_quota_limit(key, &fs.name, &limit, by, now_ms())
            .await
            .map_err(ApiError::internal)?;
        tracing::info!(user = key, fs = %fs.name, by, ?limit, kernel = %applied.note, "quota limit set");
        Ok(LimitSet {
            user: key.to_string(),
            fs: fs.name,
            limit,
            kernel: applied.note,
            by_kernel: applied.by_kernel,
        })
    }

    /// The current or last scan.
    pub fn scan_status(&self) -> ScanStatus {
        let s = self.scan.lock().unwrap();
        let mut status = s.status.clone();
        status.entries = Progress::get(&s.progress.entries);
        status.bytes = Progress::get(&s.progress.bytes);
        status
    }

    /// Starts a scan of `fs` (both when `None`), or returns the one running.
    pub async fn start_scan(self: &Arc<Self>, fs: Option<String>) -> Result<ScanStatus, ApiError> {
        let names: Vec<String> = match fs {
            Some(name) => vec![self.fs(&name)?.name],
            None => self.filesystems().into_iter().map(|f| f.name).collect(),
        };
        let mut expected = 0;
        for n in &names {
            if let Ok(Some(s)) = self.db.latest_quota_scan(n).await {
                expected += s.report.total().files;
            }
        }
        {
            let mut s = self.scan.lock().unwrap();
            if s.status.running {
                return Ok(s.status.clone());
            }
            s.progress = Arc::new(Progress::default());
            s.status = ScanStatus {
                id: s.status.id + 1,
                running: true,
                fs: names.clone(),
                expected_entries: expected,
                ..ScanStatus::default()
            };
        }
        let svc = self.clone();
        tokio::spawn(async move {
            let error = svc.run_scan(&names).await.err();
            let mut s = svc.scan.lock().unwrap();
            s.status.running = false;
            s.status.error = error;
        });
        Ok(self.scan_status())
    }

    /// Scans each file system in turn and stores what it found.
    async fn run_scan(&self, names: &[String]) -> Result<(), String> {
        let _one = self.scan_lock.lock().await;
        let progress = self.scan.lock().unwrap().progress.clone();
        for name in names {
            let fs = self.fs(name).map_err(|e| e.body.error)?;
            if !fs.root.is_dir() {
                return Err(format!(
                    "{} ({}) does not exist; create it or fix [quotas.{}] root",
                    fs.root.display(),
                    fs.name,
                    fs.name
                ));
            }
            let started = now_ms();
            let clock = Instant::now();
            let (root, options, p) = (fs.root.clone(), self.scan_options(), progress.clone());
            let report = tokio::task::spawn_blocking(move || scan(&root, &options, &p))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("scanning {}: {e}", fs.root.display()))?;
            let limits = self.db.quota_limits().await.map_err(|e| e.to_string())?;
            let over: BTreeSet<u32> = report
                .users
                .iter()
                .filter(|(uid, u)| {
                    let (l, _) = Self::effective(&limits, &user_name(**uid), &fs);
                    l.over_soft(&Usage {
                        bytes: u.bytes,
                        files: u.files,
                    })
                })
                .map(|(uid, _)| *uid)
                .collect();
            let total = report.total();
            let summary = ScanSummary {
                fs: fs.name.clone(),
                entries: total.files,
                bytes: total.bytes,
                users: report.users.len(),
                errors: report.error_count,
                mounts_skipped: report.mounts_skipped.clone(),
                seconds: clock.elapsed().as_secs_f64(),
            };
            for (path, why) in report.errors.iter().take(5) {
                tracing::warn!(fs = %fs.name, path = %path.display(), "quota scan could not read: {why}");
            }
            let stored = StoredScan {
                started,
                finished: now_ms(),
                report,
            };
            self.db
                .store_quota_scan(&fs.name, &stored, &over)
                .await
                .map_err(|e| e.to_string())?;
            tracing::info!(
                fs = %fs.name,
                entries = summary.entries,
                bytes = summary.bytes,
                seconds = format!("{:.1}", summary.seconds),
                "quota scan done"
            );
            self.scan.lock().unwrap().status.done.push(summary);
        }
        Ok(())
    }

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

    /// The datasets audit: registered datasets (the datasets root when none is registered).
    pub async fn audit(&self, fix: bool) -> Result<AuditReport, ApiError> {
        let mut roots: Vec<PathBuf> = self
            .db
            .datasets()
            .await
            .map_err(ApiError::internal)?
            .into_iter()
            .map(|d| d.path)
            .filter(|p| p.exists())
            .collect();
        if roots.is_empty() {
            roots.push(self.config.datasets.root.clone());
        }
        let mut trusted = Trusted::default();
        if let Ok(Some(g)) = nix::unistd::Group::from_name(&self.config.controller.admin_group) {
            trusted.gids.insert(g.gid.as_raw());
            for m in &g.mem {
                if let Ok(Some(u)) = nix::unistd::User::from_name(m) {
                    trusted.uids.insert(u.uid.as_raw());
                }
            }
        }
        let threads = self.config.datasets.scan_threads;
        let report = tokio::task::spawn_blocking(move || {
            labpool_quotas::audit::audit(&roots, &trusted, fix, threads, &Progress::default())
        })
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| ApiError::bad_request(format!("the datasets audit failed: {e}"), None))?;
        for o in &report.offenders {
            tracing::warn!(
                path = %o.path.display(),
                owner = %user_name(o.uid),
                mode = format!("{:o}", o.mode),
                why = o.why.join(","),
                fixed = o.fixed,
                "dataset entry writable by members"
            );
        }
        if !report.offenders.is_empty()
            && let Some(url) = &self.config.alerts.webhook
        {
            let body = serde_json::json!({
                "kind": "dataset_audit",
                "offenders": report.offenders.len(),
                "fixed": report.offenders.iter().filter(|o| o.fixed).count(),
                "first": report.offenders.iter().take(20).map(|o| o.path.display().to_string()).collect::<Vec<_>>(),
            });
            if let Err(e) = crate::webhook::post(url, &body).await {
                tracing::warn!("audit findings not posted: {e:#}");
            }
        }
        Ok(report)
    }
}

/// Runs the scheduled scan, purge and audit until `stop`. Each waits for the one before it:
/// they walk the same disks. A run missed while the controller was down is not caught up; the
/// next one comes at its time.
pub async fn timer(service: Arc<QuotaService>, mut stop: tokio::sync::watch::Receiver<bool>) {
    use crate::schedule::Schedule;
    let c = &service.config;
    let scan_text = c
        .quotas
        .scan_schedule
        .clone()
        .unwrap_or_else(|| "0 * * * *".to_string());
    let purge_text = if c.purge.enabled {
        c.purge.schedule.clone()
    } else {
        String::new()
    };
    let parse = |t: &str| (!t.is_empty()).then(|| Schedule::parse(t).ok()).flatten();
    let jobs: Vec<(&str, Option<Schedule>)> = vec![
        ("scan", parse(&scan_text)),
        ("purge", parse(&purge_text)),
        ("audit", parse(&c.datasets.audit_schedule)),
    ];
    let mut last: BTreeMap<&str, chrono::DateTime<chrono::Utc>> =
        jobs.iter().map(|(n, _)| (*n, chrono::Utc::now())).collect();
    loop {
        let now = chrono::Utc::now();
        for (name, sched) in &jobs {
            let Some(sched) = sched else { continue };
            if sched.due(last[name], now).is_none() {
                continue;
            }
            last.insert(name, now);
            match *name {
                "scan" => {
                    if let Err(e) = service.start_scan(None).await {
                        tracing::error!("scheduled quota scan: {}", e.body.error);
                    }
                    // Wait for it, so a purge at the same minute does not walk alongside it.
                    while service.scan_status().running {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    if let Some(e) = service.scan_status().error {
                        tracing::error!("scheduled quota scan failed: {e}");
                    }
                }
                "purge" => {
                    let result = match service.plan_purge().await {
                        Ok((id, _)) => service.execute_purge(&id).await,
                        Err(e) => Err(e),
                    };
                    match result {
                        Ok(done) => tracing::info!(
                            files = done.removed.files,
                            bytes = done.removed.bytes,
                            notices = done.notices.len(),
                            "scheduled scratch purge done"
                        ),
                        Err(e) => tracing::error!("scheduled scratch purge: {}", e.body.error),
                    }
                }
                _ => match service.audit(false).await {
                    Ok(r) => tracing::info!(
                        checked = r.checked,
                        offenders = r.offenders.len(),
                        "scheduled datasets audit done"
                    ),
                    Err(e) => tracing::error!("scheduled datasets audit: {}", e.body.error),
                },
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
    }
}
