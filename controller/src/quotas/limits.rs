//! Limits: the decision at submit, and setting a limit (in the kernel where it can).

use crate::api::quotas::{LimitRequest, LimitSet};
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::identity::Caller;
use crate::quotas::QuotaService;
use crate::quotas::db::DEFAULT_USER;
use labpool_quotas::kernel::{self, Owner};
use labpool_quotas::size::{parse_count, parse_duration, parse_size};
use labpool_units::format_size;

impl QuotaService {
    /// The submit check: `Err` refuses (with usage, limit, biggest directories and what to
    /// do), `Ok` carries warnings. Running jobs are never touched by quota.
    pub async fn submit_check(&self, caller: &Caller) -> Result<Vec<String>, ApiError> {
        let q = self.user_quota_for_submit(&caller.user, caller.uid).await?;
        if !q.refused {
            return Ok(q
                .filesystems
                .iter()
                .flat_map(|f| f.messages.iter().map(|m| format!("quota: {m}")))
                .collect());
        }
        let mut msg = format!("{} is over quota; new jobs are refused:", caller.user);
        let over: Vec<&str> = q
            .filesystems
            .iter()
            .filter(|f| f.findings.iter().any(|x| x.refuses()))
            .map(|f| f.fs.as_str())
            .collect();
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
                "delete or move files on {fs} (`labpool quota` shows where the space is), then `labpool quota scan` counts again; or ask an admin to raise the limit (labpool quota set {} --fs {first} --hard SIZE). Running jobs are not affected",
                caller.user,
                fs = over.join(" and "),
                first = over.first().copied().unwrap_or("FS")
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
        self.stored.forget();
        tracing::info!(user = key, fs = %fs.name, by, ?limit, kernel = %applied.note, "quota limit set");
        Ok(LimitSet {
            user: key.to_string(),
            fs: fs.name,
            limit,
            kernel: applied.note,
            by_kernel: applied.by_kernel,
        })
    }
}
