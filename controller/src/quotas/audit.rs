//! The datasets audit: entries in registered datasets that members could write.

use crate::error::ApiError;
use crate::identity::user_name;
use crate::quotas::QuotaService;
use labpool_quotas::Progress;
use labpool_quotas::audit::{AuditReport, Trusted};
use std::path::PathBuf;

impl QuotaService {
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
