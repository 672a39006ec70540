//! What a report is computed from, and what it holds.

use serde::{Deserialize, Serialize};

/// One job as the history keeps it (its last attempt).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Id.
    pub id: u64,
    /// Owner.
    pub user: String,
    /// Account (research group), if any.
    pub account: Option<String>,
    /// Partition.
    pub partition: String,
    /// GPU type it ran on (`a100`), or `-` without GPUs.
    pub gpu_type: String,
    /// GPUs it held (all nodes).
    pub gpus: u32,
    /// The part of its card a slice held (0.25 for a quarter); `None` for whole GPUs. GPU-hours
    /// count a slice by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<f64>,
    /// Submitted, ms.
    pub submit_ms: i64,
    /// Started, ms.
    pub start_ms: Option<i64>,
    /// Ended, ms (None while it runs).
    pub end_ms: Option<i64>,
    /// State (`COMPLETED`, `FAILED`, `RUNNING`, …).
    pub state: String,
    /// Mean GPU utilisation of its run, percent, where NVML sampled it.
    pub util_mean: Option<f64>,
    /// Energy its GPUs used, J, where NVML sampled it.
    pub energy_j: Option<f64>,
}

impl JobRecord {
    /// GPUs it held as GPU-hours count them: a slice by its part of the card.
    pub fn gpu_weight(&self) -> f64 {
        f64::from(self.gpus) * self.slice.unwrap_or(1.0)
    }
}

/// One ledger line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerRecord {
    /// When, ms.
    pub time_ms: i64,
    /// Whose.
    pub user: String,
    /// `grant`, `charge`, `rebate`, `emergency_token`.
    pub kind: String,
    /// Credits.
    pub amount: f64,
}

/// How the leaderboard is shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Leaderboard {
    /// With names.
    #[default]
    On,
    /// Members numbered by rank instead of named.
    Anonymous,
    /// Not shown.
    Off,
}

/// One member's use of a quota file system, at the last scan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuotaLine {
    /// Member.
    pub user: String,
    /// `home` or `scratch`.
    pub fs: String,
    /// Bytes used.
    pub used_bytes: u64,
    /// Soft limit, bytes.
    pub soft_bytes: Option<u64>,
    /// Hard limit, bytes.
    pub hard_bytes: Option<u64>,
}

/// Storage as it stands when the report is made (not over the range: scans and the snapshot
/// repository keep no history of their own).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Storage {
    /// Home and scratch use against quota, per member.
    pub quotas: Vec<QuotaLine>,
    /// The bytes the snapshots hold, summed over every snapshot (what restoring all would give).
    pub snapshot_logical_bytes: Option<u64>,
    /// The bytes the snapshot repository takes on disk.
    pub snapshot_stored_bytes: Option<u64>,
    /// The last scratch purge: when (ms), files and bytes reclaimed.
    pub last_purge: Option<(i64, u64, u64)>,
}

impl Storage {
    /// Logical over stored snapshot bytes: how many times deduplication and compression pay.
    pub fn dedup_ratio(&self) -> Option<f64> {
        match (self.snapshot_logical_bytes, self.snapshot_stored_bytes) {
            (Some(l), Some(s)) if s > 0 => Some(l as f64 / s as f64),
            _ => None,
        }
    }
}

/// What a report is computed from.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Input {
    /// From, ms (inclusive).
    pub from_ms: i64,
    /// To, ms (exclusive).
    pub to_ms: i64,
    /// The label of the range (`2026-11`, `2026-09-01 to 2027-01-31`).
    pub label: String,
    /// GPUs in the pool.
    pub pool_gpus: u32,
    /// Jobs that overlap the range or were submitted in it.
    pub jobs: Vec<JobRecord>,
    /// Ledger lines in the range.
    pub ledger: Vec<LedgerRecord>,
    /// The leaderboard setting.
    pub leaderboard: Leaderboard,
    /// Hours are counted in this offset from UTC, minutes (for days).
    pub utc_offset_min: i32,
    /// Storage now, when the caller may see it.
    #[serde(default)]
    pub storage: Option<Storage>,
    /// Now, ms, when the range has not ended yet (a month in progress): every figure stops
    /// here. None: the range is over.
    #[serde(default)]
    pub now_ms: Option<i64>,
}

impl Input {
    /// Where the figures stop: the range's end, or now when that comes first.
    pub fn until_ms(&self) -> i64 {
        self.now_ms
            .map_or(self.to_ms, |now| now.min(self.to_ms))
            .max(self.from_ms)
    }
}

/// GPU use of one group (a user, an account, a GPU type, a partition, or all).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UseRow {
    /// The group.
    pub key: String,
    /// Jobs that held GPUs in the range.
    pub jobs: u64,
    /// GPU-hours allocated in the range.
    pub gpu_hours: f64,
    /// GPU-hours used: allocated x utilisation, over the sampled jobs.
    pub used_gpu_hours: f64,
    /// Allocated GPU-hours of jobs NVML sampled (what `used_gpu_hours` is out of).
    pub sampled_gpu_hours: f64,
}

impl UseRow {
    /// Device utilisation over the sampled jobs as `37%`, or `-` when none was sampled.
    pub fn utilisation_text(&self) -> String {
        if self.sampled_gpu_hours > 0.0 {
            format!(
                "{:.0}%",
                100.0 * self.used_gpu_hours / self.sampled_gpu_hours
            )
        } else {
            "-".into()
        }
    }
}

/// Waits of one group of jobs started in the range.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitRow {
    /// The group: a partition, or a job size (`1 GPU`, `2-4 GPUs`, …).
    pub key: String,
    /// Jobs.
    pub jobs: u64,
    /// Median wait, s.
    pub p50_s: i64,
    /// 90th percentile, s.
    pub p90_s: i64,
    /// 95th percentile, s.
    pub p95_s: i64,
}

/// Credits moved in the range.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CreditRow {
    /// Charged for jobs.
    pub charged: f64,
    /// Granted by admins.
    pub granted: f64,
    /// Given back for efficient use.
    pub rebated: f64,
    /// Emergency tokens spent.
    pub emergency_tokens: u64,
}

/// One member on the leaderboard.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeaderRow {
    /// Rank.
    pub rank: u32,
    /// Name, or `member N` when anonymised.
    pub user: String,
    /// Jobs.
    pub jobs: u64,
    /// GPU-hours.
    pub gpu_hours: f64,
    /// Utilisation over their sampled GPU-hours, percent (None: none sampled).
    pub util: Option<f64>,
}

/// Next month's expected demand, from the range's own weeks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ForecastView {
    /// GPU-hours expected to be asked for in the next 30 days.
    pub next_30_days_gpu_hours: f64,
    /// The weekly totals' trend: GPU-hours per week, per week.
    pub trend_per_week: f64,
    /// Expected GPU-hours asked for on each weekday of a week, Monday first.
    pub by_weekday: Vec<(String, f64)>,
    /// Expected GPU-hours asked for in each hour of a day, summed over a week.
    pub by_hour: Vec<(u32, f64)>,
}

/// The report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The range's label.
    pub label: String,
    /// From, ms.
    pub from_ms: i64,
    /// To, ms.
    pub to_ms: i64,
    /// Where the figures stop: `to_ms`, or the moment the report was made while the range was
    /// still in progress.
    #[serde(default)]
    pub until_ms: i64,
    /// GPUs in the pool.
    pub pool_gpus: u32,
    /// Jobs in the range: submitted before it ended and not over before it began. `outcomes`
    /// sums to this.
    #[serde(default)]
    pub jobs: u64,
    /// Jobs that held GPUs in the range, and what they held (`total.jobs` of them).
    pub total: UseRow,
    /// Per user, most GPU-hours first.
    pub by_user: Vec<UseRow>,
    /// Per account (`-`: none).
    pub by_account: Vec<UseRow>,
    /// Per GPU type.
    pub by_gpu_type: Vec<UseRow>,
    /// Per partition.
    pub by_partition: Vec<UseRow>,
    /// Pool utilisation: allocated GPU-hours over the pool's, percent.
    pub utilisation: f64,
    /// GPU-hours left idle while jobs waited for GPUs (sreport's "Planned").
    pub idle_with_demand_gpu_hours: f64,
    /// Pool utilisation per day: (date, percent).
    pub by_day: Vec<(String, f64)>,
    /// Waits per partition.
    pub waits_by_partition: Vec<WaitRow>,
    /// Waits per job size.
    pub waits_by_size: Vec<WaitRow>,
    /// Every job in the range by its state where the figures stop: how it ended, or
    /// `RUNNING` / `PENDING` when it had not.
    pub outcomes: Vec<(String, u64)>,
    /// Credits.
    pub credits: CreditRow,
    /// Energy of the sampled jobs of the range that had ended, kWh (None: nothing sampled).
    pub energy_kwh: Option<f64>,
    /// By GPU-hours (None: switched off).
    pub leaderboard: Option<Vec<LeaderRow>>,
    /// By utilisation, among members with sampled use (None: switched off).
    pub efficiency: Option<Vec<LeaderRow>>,
    /// True when no job in the range was sampled: use is allocation only.
    pub allocation_only: bool,
    /// The demand forecast (None: the range is shorter than two weeks).
    pub forecast: Option<ForecastView>,
    /// Storage now.
    pub storage: Option<Storage>,
    /// The range's jobs replayed on today's pool and on a proposed one (`labpool report
    /// --what-if`); None unless asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what_if: Option<WhatIf>,
}

/// The range's GPU jobs replayed through the daemon's own scheduler and lifecycle, on today's
/// pool and with nodes added: the figure a funding application quotes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WhatIf {
    /// The nodes added, as given (`+2x8:a100`).
    pub added: String,
    /// GPU jobs replayed.
    pub jobs: usize,
    /// (p50, p95) wait the jobs really had, seconds.
    pub recorded_wait_s: (f64, f64),
    /// (p50, p95) wait in the replay on today's pool, seconds.
    pub today_wait_s: (f64, f64),
    /// (p50, p95) wait in the replay with the nodes added, seconds.
    pub proposed_wait_s: (f64, f64),
    /// GPU utilisation in the replay on today's pool and with the nodes added, 0 to 1.
    pub util: (f64, f64),
}
