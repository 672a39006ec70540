//! What users' quotas are now: limits, last scans and grace records, read once per request.

use crate::api::quotas::{FsQuota, UserQuota};
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::identity::user_name;
use crate::quotas::QuotaService;
use crate::quotas::db::StoredScan;
use crate::settings::QuotaFs;
use labpool_quotas::kernel;
use labpool_quotas::limits::{Limit, Usage, evaluate, percent_used};
use std::collections::{BTreeMap, BTreeSet};

/// Everything a quota is judged from, read once for one request.
struct Loaded {
    limits: BTreeMap<(String, String), Limit>,
    filesystems: Vec<LoadedFs>,
}

/// One file system's state: its last scan, since when each uid is over a soft limit, and how
/// limits on it are enforced (when asked: finding out reads the mount table and `PATH`).
struct LoadedFs {
    fs: QuotaFs,
    scan: Option<StoredScan>,
    grace: BTreeMap<u32, i64>,
    enforcement: Option<kernel::Enforcement>,
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
                enforcement: enforcement
                    .as_ref()
                    .map_or_else(String::new, |e| e.describe()),
                by_kernel: enforcement.as_ref().is_some_and(|e| e.by_kernel()),
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
    /// What every user's quota is judged from, read once: limits, each file system's last
    /// scan, grace records, and, with `enforcement`, how the kernel enforces. The submit check
    /// goes without it: the decision does not depend on it, and it costs a read of the mount
    /// table per file system on every submit.
    async fn load(&self, enforcement: bool) -> Result<Loaded, ApiError> {
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
            let enforcement = enforcement.then(|| kernel::detect(&fs.root));
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
        Ok(self.load(true).await?.user_quota(user, uid, now_ms()))
    }

    /// One user's quotas now, as the submit check needs them: without how they are enforced.
    pub(crate) async fn user_quota_for_submit(
        &self,
        user: &str,
        uid: u32,
    ) -> Result<UserQuota, ApiError> {
        Ok(self.load(false).await?.user_quota(user, uid, now_ms()))
    }

    /// Every user seen by a scan or holding a limit, fullest first.
    pub async fn report(&self) -> Result<Vec<UserQuota>, ApiError> {
        let loaded = self.load(true).await?;
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
}
