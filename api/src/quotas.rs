//! The quota, purge and audit API: what the CLI sends and the controller answers.

use labpool_quotas::limits::{Finding, Limit, Usage};
use labpool_quotas::purge::Tally;
use labpool_quotas::scan::TopDir;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `GET /v1/quota?user=`: whose quota (admins only for someone else).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QuotaQuery {
    /// A login name; the caller when absent.
    pub user: Option<String>,
}

/// Where a limit comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitSource {
    /// Set for this user (`quota set`).
    User,
    /// The admin's default (`quota default`).
    Default,
    /// The config file's default.
    Config,
}

/// One user on one file system.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FsQuota {
    /// `home` or `scratch`.
    pub fs: String,
    /// The file system's root.
    pub root: PathBuf,
    /// The user's directory.
    pub user_dir: PathBuf,
    /// The limit that applies.
    pub limit: Limit,
    /// Where it comes from.
    pub limit_source: LimitSource,
    /// Usage at the last scan (`None`: never scanned).
    pub usage: Option<Usage>,
    /// Apparent bytes at the last scan.
    pub apparent: Option<u64>,
    /// When the last scan finished, ms.
    pub scanned_at: Option<i64>,
    /// Percent of the limit that applies.
    pub percent: Option<f64>,
    /// Over a soft limit since, ms.
    pub over_soft_since: Option<i64>,
    /// Refusals and warnings, worst first.
    pub findings: Vec<Finding>,
    /// The findings in words.
    pub messages: Vec<String>,
    /// The biggest directories.
    pub top: Vec<TopDir>,
    /// How the limit is enforced, in words.
    pub enforcement: String,
    /// Whether the kernel stops writes past the hard limit.
    pub by_kernel: bool,
}

/// One user's quotas.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserQuota {
    /// Login name.
    pub user: String,
    /// Uid.
    pub uid: u32,
    /// Per file system.
    pub filesystems: Vec<FsQuota>,
    /// Whether a submit would be refused now.
    pub refused: bool,
    /// Highest percent used over the file systems.
    pub percent: Option<f64>,
}

/// `POST /v1/quota/limits`: sets a user's limit (or the default). Values are as typed
/// (`50G`, `none`, `7d`) and checked by the controller; a field left out keeps its value.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LimitRequest {
    /// A login name; `None` sets the default for users with no limit of their own.
    pub user: Option<String>,
    /// `home` or `scratch`.
    pub fs: String,
    /// Soft byte limit.
    pub soft: Option<String>,
    /// Hard byte limit.
    pub hard: Option<String>,
    /// Soft limit on entries.
    pub files_soft: Option<String>,
    /// Hard limit on entries.
    pub files_hard: Option<String>,
    /// Grace period.
    pub grace: Option<String>,
}

/// What `POST /v1/quota/limits` did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LimitSet {
    /// The user, or `*` for the default.
    pub user: String,
    /// The file system.
    pub fs: String,
    /// The limit now.
    pub limit: Limit,
    /// What the kernel enforces for it, in words.
    pub kernel: String,
    /// Whether the kernel enforces it.
    pub by_kernel: bool,
}

/// `POST /v1/quota/scan`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ScanRequest {
    /// One file system; both when absent.
    pub fs: Option<String>,
}

/// One file system's scan, summed up.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScanSummary {
    /// The file system.
    pub fs: String,
    /// Entries.
    pub entries: u64,
    /// Allocated bytes.
    pub bytes: u64,
    /// Owners seen.
    pub users: usize,
    /// Entries that could not be read.
    pub errors: u64,
    /// Mount points not entered.
    pub mounts_skipped: Vec<PathBuf>,
    /// Seconds it took.
    pub seconds: f64,
}

/// A scan's state, for `GET /v1/quota/scan`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ScanStatus {
    /// Which run.
    pub id: u64,
    /// Still running.
    pub running: bool,
    /// File systems in this run.
    pub fs: Vec<String>,
    /// Entries seen so far.
    pub entries: u64,
    /// Bytes counted so far.
    pub bytes: u64,
    /// Entries at the last scan of these file systems, to size a progress bar (0: unknown).
    pub expected_entries: u64,
    /// Done file systems.
    pub done: Vec<ScanSummary>,
    /// Why it failed.
    pub error: Option<String>,
}

/// `POST /v1/purge/scratch`: plan, or execute a plan made before.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PurgeRequest {
    /// The plan to execute; a new plan is made when absent.
    pub execute: Option<String>,
}

/// Entries and bytes of one user.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserTally {
    /// Login name (or uid).
    pub user: String,
    /// Uid.
    pub uid: u32,
    /// Entries and allocated bytes.
    pub tally: Tally,
}

/// One file of a plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedFile {
    /// Absolute path.
    pub path: PathBuf,
    /// Owner.
    pub user: String,
    /// Allocated bytes.
    pub bytes: u64,
    /// Days since last touched.
    pub age_days: i64,
}

/// A purge plan, as shown.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PurgePlanView {
    /// Its id, to execute it.
    pub id: String,
    /// The scratch root.
    pub root: PathBuf,
    /// The age limit, days.
    pub max_age_days: u64,
    /// Whether atime counts, and if not, why.
    pub atime_note: Option<String>,
    /// To delete, per user, most bytes first.
    pub per_user: Vec<UserTally>,
    /// To delete, in all.
    pub total: Tally,
    /// The oldest files to delete (up to 20).
    pub oldest: Vec<PlannedFile>,
    /// Passing the limit within the warning window, per user.
    pub warned: Vec<UserTally>,
    /// Kept by a `.labpool-keep` marker.
    pub kept: Vec<PathBuf>,
    /// Working directories of jobs not finished, skipped.
    pub jobs_skipped: Vec<PathBuf>,
    /// Mount points not entered.
    pub mounts_skipped: Vec<PathBuf>,
    /// Entries that could not be read.
    pub errors: usize,
}

/// What a purge did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PurgeDone {
    /// Removed, in all.
    pub removed: Tally,
    /// Removed, per user.
    pub per_user: Vec<UserTally>,
    /// Planned but left, with why.
    pub skipped: Vec<(PathBuf, String)>,
    /// The audit log, one JSON line per removed file.
    pub audit_log: PathBuf,
    /// Notices written (home files) and posted.
    pub notices: Vec<String>,
}

/// `POST /v1/datasets/audit`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AuditRequest {
    /// Fix what is found.
    pub fix: bool,
}
