//! Usage scans: one at a time, on a schedule or on demand, with progress to poll.

use crate::api::quotas::{ScanStatus, ScanSummary};
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::identity::user_name;
use crate::quotas::QuotaService;
use crate::quotas::db::StoredScan;
use labpool_quotas::Progress;
use labpool_quotas::limits::Usage;
use labpool_quotas::scan::{ScanOptions, scan};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

#[derive(Default)]
pub(super) struct ScanState {
    status: ScanStatus,
    progress: Arc<Progress>,
}

impl QuotaService {
    fn scan_options(&self) -> ScanOptions {
        ScanOptions {
            threads: self.config.quotas.scan_threads.unwrap_or(16),
            ..ScanOptions::default()
        }
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
            self.stored.forget();
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
}
