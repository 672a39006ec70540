//! `GET /v1/report`: the pool's history over a range, as `labpool_reports` computes a report
//! from it. Admins get the whole pool; a member may ask for their own use (`labpool usage`).
//!
//! A report reads and computes over its whole range, so it is bounded and kept apart from
//! everyone else's requests: a member's range is at most [`MEMBER_RANGE_DAYS`] and an
//! admin's [`ADMIN_RANGE_DAYS`]; one report is built at a time (others wait their turn), and
//! its computing runs on a blocking thread, never on the threads that answer `ping`, `queue`
//! and submits.

use crate::api::reports::ReportQuery;
use crate::engine::request::Request;
use crate::error::ApiError;
use crate::http::{AppState, Peer, admin_only, ask, caller};
use axum::Json;
use axum::Router;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::routing::get;
use labpool_reports::{Input, JobRecord, LedgerRecord, Report, compute};
use std::collections::BTreeMap;

/// The longest range a member's own report covers: a year, and a little.
pub const MEMBER_RANGE_DAYS: i64 = 400;

/// The longest range any report covers.
pub const ADMIN_RANGE_DAYS: i64 = 3660;

/// Reports built at once; the next waits for its turn.
static BUILDING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// The report routes.
pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/report", get(report))
}

async fn report(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    query: Result<Query<ReportQuery>, QueryRejection>,
) -> Result<Json<Report>, ApiError> {
    let c = caller(&state, &peer)?;
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    match &q.user {
        Some(u) if *u == c.user => {}
        Some(_) => admin_only(&state.config, &c, "see another member's usage")?,
        None => admin_only(&state.config, &c, "see the pool's report")?,
    }
    if q.to_ms <= q.from_ms {
        return Err(ApiError::bad_request(
            format!(
                "the range ends ({}) before it starts ({})",
                q.to_ms, q.from_ms
            ),
            Some("give --from before --to".into()),
        ));
    }
    let days = if c.admin {
        ADMIN_RANGE_DAYS
    } else {
        MEMBER_RANGE_DAYS
    };
    let span = (q.to_ms - q.from_ms) / 86_400_000;
    if span > days {
        return Err(ApiError::bad_request(
            format!("the range is {span} days long; a report covers at most {days}"),
            Some("ask for a shorter range (--from, --to), or several one after another".into()),
        ));
    }
    let _turn = BUILDING.acquire().await.map_err(ApiError::internal)?;
    let input = input(&state, &q).await?;
    let report = tokio::task::spawn_blocking(move || compute(&input))
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(report))
}

/// Gathers what a report over the query's range is computed from.
pub async fn input(state: &AppState, q: &ReportQuery) -> Result<Input, ApiError> {
    let nodes = ask(state, |reply| Request::Nodes { reply }).await?;
    let types: BTreeMap<String, String> = nodes
        .iter()
        .filter_map(|n| Some((n.name.clone(), n.gpus.first()?.gpu_type.clone())))
        .collect();
    let rows = state
        .db
        .jobs_in_range(q.from_ms, q.to_ms, q.user.as_deref())
        .await?;
    let ids: Vec<u64> = rows.iter().map(|r| r.id).collect();
    let usage = state.db.gpu_usage_of(&ids).await?;
    let jobs = rows
        .iter()
        .map(|r| {
            // GPUs held once started (all nodes; those of its pause for a job that ended
            // suspended); asked for while it waits.
            let held = match &r.pause {
                Some(p) if r.gpus.is_empty() => &p.gpus,
                _ => &r.gpus,
            };
            let gpus = match r.start_time {
                Some(_) => {
                    (held.len() + r.others.iter().map(|o| o.gpus.len()).sum::<usize>()) as u32
                }
                None => r.request.gpus * r.request.node_count.max(1),
            };
            let u = usage.get(&r.id).filter(|u| u.samples > 0);
            JobRecord {
                id: r.id,
                user: r.spec.user.clone(),
                account: r.spec.account.clone(),
                partition: r.spec.partition.clone(),
                gpu_type: r
                    .request
                    .gpu_type
                    .clone()
                    .or_else(|| r.node.as_ref().and_then(|n| types.get(n).cloned()))
                    .unwrap_or_else(|| "-".into()),
                gpus,
                slice: r
                    .spec
                    .resources
                    .slice
                    .filter(|_| r.start_time.is_some())
                    .map(|s| slice_part(s, &nodes, r.node.as_deref(), r.gpus.first())),
                submit_ms: r.spec.submit_time.0,
                start_ms: r.start_time,
                end_ms: r.end_time,
                state: r.state.to_string(),
                util_mean: u.map(|u| u.util_mean()),
                energy_j: u.map(|u| u.energy_j),
            }
        })
        .collect();
    let ledger = state
        .db
        .ledger(q.user.as_deref(), q.from_ms)
        .await?
        .into_iter()
        .filter(|e| e.time.0 < q.to_ms)
        .map(|e| LedgerRecord {
            time_ms: e.time.0,
            user: e.user,
            kind: e.kind.as_str().to_string(),
            amount: e.amount,
        })
        .collect();
    let offset = chrono::DateTime::from_timestamp_millis(q.from_ms)
        .map(|t| {
            use chrono::Offset;
            t.with_timezone(&chrono::Local)
                .offset()
                .fix()
                .local_minus_utc()
                / 60
        })
        .unwrap_or(0);
    let storage = storage(state, q.user.as_deref()).await;
    Ok(Input {
        storage: Some(storage),
        from_ms: q.from_ms,
        to_ms: q.to_ms,
        label: q.label.clone(),
        pool_gpus: nodes.iter().map(|n| n.gpus.len() as u32).sum(),
        jobs,
        ledger,
        // A member's own report names only them: nothing to hide, and no one to rank.
        leaderboard: match (&q.user, state.config.reports.leaderboard) {
            (Some(_), labpool_reports::Leaderboard::Anonymous) => labpool_reports::Leaderboard::On,
            (_, setting) => setting,
        },
        utc_offset_min: offset,
        // A month in progress ends now: nothing that has not happened is counted.
        now_ms: Some(crate::clock::now_ms()),
    })
}

/// Storage now: quotas (of one member when asked for theirs), and for the pool's report the
/// snapshot repository's logical and stored bytes and the last purge.
async fn storage(state: &AppState, user: Option<&str>) -> labpool_reports::Storage {
    let mut st = labpool_reports::Storage::default();
    if let Ok(report) = state.quotas.report().await {
        for u in report
            .into_iter()
            .filter(|u| user.is_none_or(|me| me == u.user))
        {
            for fs in u.filesystems {
                if let Some(usage) = fs.usage {
                    st.quotas.push(labpool_reports::QuotaLine {
                        user: u.user.clone(),
                        fs: fs.fs,
                        used_bytes: usage.bytes,
                        soft_bytes: fs.limit.soft_bytes,
                        hard_bytes: fs.limit.hard_bytes,
                    });
                }
            }
        }
    }
    if user.is_some() {
        return st;
    }
    let snapshots = state.snapshots.clone();
    let sizes = tokio::task::spawn_blocking(move || -> Option<(u64, u64)> {
        let repo = snapshots.repo().ok()??;
        let logical = repo.snapshots().ok()?.iter().map(|s| s.bytes).sum();
        let mut stored = 0;
        for id in repo.pack_files().ok()? {
            stored += repo.pack_file(&id).ok()?.metadata().ok()?.len();
        }
        Some((logical, stored))
    })
    .await
    .ok()
    .flatten();
    if let Some((logical, stored)) = sizes {
        st.snapshot_logical_bytes = Some(logical);
        st.snapshot_stored_bytes = Some(stored);
    }
    st.last_purge = crate::quotas::purge::PurgeLast::read(&state.config.controller.state_dir)
        .map(|p| (p.at_ms, p.files, p.bytes));
    st
}

/// The part of its card a slice held: `1/D` for a typed slice; for `shard:N`, N over the
/// shards of the card it ran on (as the node reports it now).
fn slice_part(
    slice: labpool_scheduler::slice::Slice,
    nodes: &[labpool_api::NodeView],
    node: Option<&str>,
    gpu: Option<&u32>,
) -> f64 {
    use labpool_scheduler::slice::Slice;
    match slice {
        Slice::Fraction(d) => 1.0 / f64::from(d.max(1)),
        Slice::Shards(n) => {
            let shards = nodes
                .iter()
                .find(|v| Some(v.name.as_str()) == node)
                .and_then(|v| v.gpus.iter().find(|g| Some(&g.index) == gpu))
                .map_or(1, |g| g.share.max(1));
            (f64::from(n) / f64::from(shards)).min(1.0)
        }
    }
}
