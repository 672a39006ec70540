//! Advice from measurement: a one-GPU job whose runs used far less GPU memory than its card
//! holds is told which slice would have held them, and what a whole card cost it in waiting.
//! `labpool show`, `labpool why` and the end-of-job mail carry it. The figures are NVML's peaks, sampled while the
//! job ran (its own, and its user's last runs of the same name).

use crate::api::NodeView;
use crate::db::{Db, DbError};
use crate::jobs::JobRow;
use labpool_scheduler::JobState;
use labpool_scheduler::slice::smallest_fitting;
use labpool_units::{format_duration, format_mib};
use sqlx::Row;
use std::time::Duration;

/// Runs of the same name looked at, the job's own included.
const RUNS: i64 = 5;

impl Db {
    /// The GPU memory peaks, MiB, of `user`'s last finished runs named `name` other than
    /// `except`, newest first, at most `limit`.
    pub async fn recent_gpu_peaks(
        &self,
        user: &str,
        name: &str,
        except: u64,
        limit: i64,
    ) -> Result<Vec<u64>, DbError> {
        let rows = sqlx::query(
            "SELECT u.mem_peak_mib FROM jobs j JOIN job_gpu_usage u ON u.job = j.id AND u.attempt = j.attempt \
             WHERE j.user = ? AND j.name = ? AND j.id != ? AND j.end_time IS NOT NULL AND u.mem_peak_mib > 0 \
             ORDER BY j.end_time DESC LIMIT ?",
        )
        .bind(user)
        .bind(name)
        .bind(except as i64)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok(r.try_get::<i64, _>(0)?.max(0) as u64))
            .collect()
    }
}

/// The advice for `row`, whose own peak (if it ran and was sampled) is `own_peak`: `None` when
/// it did not ask for one whole GPU, no card it could use is sliced, or no slice would hold its
/// runs' peak.
pub(crate) async fn slice_advice(
    db: &Db,
    nodes: &[NodeView],
    row: &JobRow,
    own_peak: Option<u64>,
    now_ms: i64,
) -> Result<Option<String>, DbError> {
    let r = &row.spec.resources;
    if r.gpus != 1 || r.node_count() != 1 || r.slice.is_some() || r.gpu_share {
        return Ok(None);
    }
    // The card it ran on, or for a waiting job the sliced cards of its type.
    let cards: Vec<&crate::api::GpuView> = nodes
        .iter()
        .filter(|n| row.node.as_ref().is_none_or(|on| on == &n.name))
        .flat_map(|n| n.gpus.iter())
        .filter(|g| match (&row.node, row.gpus.first()) {
            (Some(_), Some(i)) => g.index == *i,
            _ => r.gpu_type.as_ref().is_none_or(|t| t == &g.gpu_type),
        })
        .filter(|g| !g.slices.is_empty() && g.memory_mib > 0)
        .collect();
    let Some(card) = cards.first() else {
        return Ok(None);
    };
    // A peak of 0 is a job that never touched its card, or one not sampled: nothing to say.
    let own_peak = own_peak.filter(|p| *p > 0);
    let mut peaks: Vec<u64> = own_peak.into_iter().collect();
    let before = RUNS - peaks.len() as i64;
    peaks.extend(
        db.recent_gpu_peaks(&row.spec.user, &row.spec.name, row.id, before)
            .await?,
    );
    let Some(peak) = peaks.iter().copied().max() else {
        return Ok(None);
    };
    let Some(d) = smallest_fitting(peak, card.memory_mib, &card.slices) else {
        return Ok(None);
    };
    let runs = match peaks.len() {
        1 if own_peak.is_some() => "it peaked".to_string(),
        1 => "your last run of it peaked".to_string(),
        n => format!("your last {n} runs of it peaked"),
    };
    let mut text = format!(
        "{runs} at {} of GPU memory: --gres=gpu:{}.{d}:1 ({} of a {} card, 1/{d} of the credits) would hold it",
        format_mib(peak),
        card.gpu_type,
        format_mib(card.memory_mib / u64::from(d)),
        format_mib(card.memory_mib),
    );
    let waited_ms = match (row.start_time, row.state) {
        (Some(start), _) => start - row.spec.submit_time.0,
        (None, JobState::Pending) => now_ms - row.spec.submit_time.0,
        _ => 0,
    };
    if waited_ms >= 60_000 {
        let waited = format_duration(Duration::from_millis(waited_ms as u64));
        text.push_str(&format!("; it waited {waited} for a whole card"));
    }
    Ok(Some(text))
}
