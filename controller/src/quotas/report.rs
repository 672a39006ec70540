//! What users' quotas are now: limits, last scans and grace records.

use crate::api::quotas::{FsQuota, UserQuota};
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::identity::user_name;
use crate::quotas::QuotaService;
use crate::quotas::stored::{Stored, StoredFs};
use crate::settings::QuotaFs;
use labpool_quotas::kernel;
use labpool_quotas::limits::{Usage, evaluate, percent_used};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Everything a quota is judged from, for one request.
struct Loaded {
    stored: Arc<Stored>,
    filesystems: Vec<LoadedFs>,
}

/// One file system, and how limits on it are enforced (when asked: finding out reads the
/// mount table and `PATH`).
struct LoadedFs {
    fs: QuotaFs,
    enforcement: Option<kernel::Enforcement>,
}

impl Loaded {
    /// One user's quotas at `now`.
    fn user_quota(&self, user: &str, uid: u32, now: i64) -> UserQuota {
        let mut filesystems = Vec::new();
        for LoadedFs { fs, enforcement } in &self.filesystems {
            let (limit, limit_source) = QuotaService::effective(&self.stored.limits, user, fs);
            let rows = self.stored.filesystems.get(&fs.name);
            let scan = rows.and_then(|r| r.scan.as_ref());
            let since = rows.and_then(|r| r.grace.get(&uid).copied());
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
                scanned_at: scan.map(|s| s.finished),
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
    /// What every user's quota is judged from: the quota tables' rows (kept between writes,
    /// see [`crate::quotas::stored`]) and, with `enforcement`, how the kernel enforces. The
    /// submit check goes without it: the decision does not depend on it, and it costs a read
    /// of the mount table per file system on every submit.
    async fn load(&self, enforcement: bool) -> Result<Loaded, ApiError> {
        let filesystems = self.filesystems();
        let stored = self.stored(&filesystems).await?;
        Ok(Loaded {
            stored,
            filesystems: filesystems
                .into_iter()
                .map(|fs| {
                    let enforcement = enforcement.then(|| kernel::detect(&fs.root));
                    LoadedFs { fs, enforcement }
                })
                .collect(),
        })
    }

    /// The quota tables' rows for `filesystems`: the copy kept since the last write, or read
    /// now (and kept, unless a write came meanwhile).
    async fn stored(&self, filesystems: &[QuotaFs]) -> Result<Arc<Stored>, ApiError> {
        let names: Vec<&str> = filesystems.iter().map(|f| f.name.as_str()).collect();
        let writes = match self.stored.get(&names) {
            Ok(stored) => return Ok(stored),
            Err(writes) => writes,
        };
        let mut stored = Stored {
            limits: self.db.quota_limits().await.map_err(ApiError::internal)?,
            filesystems: BTreeMap::new(),
        };
        for name in names {
            let scan = self
                .db
                .latest_quota_scan(name)
                .await
                .map_err(ApiError::internal)?;
            let grace = self
                .db
                .quota_grace(name)
                .await
                .map_err(ApiError::internal)?;
            stored
                .filesystems
                .insert(name.to_string(), StoredFs { scan, grace });
        }
        let stored = Arc::new(stored);
        self.stored.keep(writes, Arc::clone(&stored));
        Ok(stored)
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
            let rows = loaded.stored.filesystems.get(&f.fs.name);
            if let Some(s) = rows.and_then(|r| r.scan.as_ref()) {
                uids.extend(s.report.users.keys());
            }
        }
        for (user, _) in loaded.stored.limits.keys() {
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
