//! `labpool report` (admins: the pool's use over a month or a range, as HTML, CSV or JSON) and
//! `labpool usage` (a member's own month against the one before). The controller computes the
//! figures (`GET /v1/report`); this side writes them out.

use crate::api::quotas::UserQuota;
use crate::api::reports::ReportQuery;
use crate::client::Client;
use crate::settings::Config;
use anyhow::Context;
use chrono::{Local, NaiveDate};
use labpool_reports::{Report, to_csv, to_html};

/// How a report is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One self-contained page with charts, printable to PDF.
    Html,
    /// One figure a line: section,key,metric,value.
    Csv,
    /// The figures as JSON.
    Json,
}

pub use crate::clock::{midnight, month_before, month_range};

/// The range to report: a month, or days from `from` through `to` (both included).
pub fn range(
    month: Option<&str>,
    from: Option<&str>,
    to: Option<&str>,
    default_month: String,
) -> anyhow::Result<(i64, i64, String)> {
    let day = |flag: &str, d: &str| {
        NaiveDate::parse_from_str(d, "%Y-%m-%d")
            .with_context(|| format!("{flag} {d:?}: give YYYY-MM-DD, e.g. 2026-09-01"))
    };
    match (month, from, to) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            anyhow::bail!("give --month, or --from and --to, not both")
        }
        (Some(m), None, None) => {
            let (a, b) = month_range(m)?;
            Ok((a, b, m.to_string()))
        }
        (None, Some(f), Some(t)) => {
            let (f, t) = (day("--from", f)?, day("--to", t)?);
            anyhow::ensure!(
                f <= t,
                "--from {f} is after --to {t}: give the earlier day first"
            );
            let end = t.succ_opt().expect("a day after exists");
            Ok((midnight(f), midnight(end), format!("{f} to {t}")))
        }
        (None, None, None) => {
            let (a, b) = month_range(&default_month)?;
            Ok((a, b, default_month))
        }
        _ => anyhow::bail!("give both --from and --to (days, both included)"),
    }
}

/// The what-if section: the range's jobs replayed with the simulator's default link and disk
/// figures (those of `labpool sim`), on today's pool and with `spec` added.
async fn what_if_section(
    spec: &str,
    q: &ReportQuery,
    config: &Config,
) -> anyhow::Result<Option<labpool_reports::WhatIf>> {
    #[derive(clap::Parser)]
    struct Defaults {
        #[command(flatten)]
        sim: crate::args::SimArgs,
    }
    let mut args = <Defaults as clap::Parser>::try_parse_from(["labpool", "--from-history"])?.sim;
    args.nodes = spec.to_string();
    let replay = super::sim_history::replay(&args, config, q.from_ms, q.to_ms, &q.label).await?;
    Ok(replay.what_if(spec))
}

/// `labpool report`.
pub async fn report(
    month: Option<&str>,
    from: Option<&str>,
    to: Option<&str>,
    format: Format,
    out: Option<&std::path::Path>,
    what_if: Option<&str>,
    config: &Config,
) -> anyhow::Result<()> {
    if let Some(spec) = what_if {
        anyhow::ensure!(
            spec.starts_with('+'),
            "--what-if {spec:?}: give the nodes to add as +COUNTxGPUS[:TYPE], e.g. +2x8:a100"
        );
    }
    let last_month = month_before(&Local::now().format("%Y-%m").to_string())?;
    let (from_ms, to_ms, label) = range(month, from, to, last_month)?;
    let q = ReportQuery {
        from_ms,
        to_ms,
        label,
        user: None,
    };
    let mut r: Report = Client::new(&config.controller.socket)
        .get_query("/v1/report", &q)
        .await?;
    if let Some(spec) = what_if {
        r.what_if = what_if_section(spec, &q, config).await?;
    }
    let text = match format {
        Format::Html => to_html(&r),
        Format::Csv => to_csv(&r),
        Format::Json => format!("{}\n", serde_json::to_string_pretty(&r)?),
    };
    match out {
        Some(path) => {
            std::fs::write(path, &text)
                .with_context(|| format!("cannot write the report to {}", path.display()))?;
            crate::out!("report for {} written to {}", r.label, path.display());
        }
        None => crate::out!("{}", text.trim_end()),
    }
    Ok(())
}

/// `labpool usage`.
pub async fn usage(
    user: Option<&str>,
    month: Option<&str>,
    as_json: bool,
    config: &Config,
) -> anyhow::Result<()> {
    let me = crate::identity::user_name(crate::identity::effective_uid());
    let user = user.map_or(me, str::to_string);
    let month = month.map_or_else(|| Local::now().format("%Y-%m").to_string(), str::to_string);
    let before = month_before(&month)?;
    let client = Client::new(&config.controller.socket);
    let mut reports = Vec::new();
    for m in [&month, &before] {
        let (from_ms, to_ms) = month_range(m)?;
        let q = ReportQuery {
            from_ms,
            to_ms,
            label: m.clone(),
            user: Some(user.clone()),
        };
        let r: Report = client.get_query("/v1/report", &q).await?;
        reports.push(r);
    }
    let quota: Option<UserQuota> = client
        .get_query("/v1/quota", &serde_json::json!({ "user": user }))
        .await
        .ok();
    if as_json {
        let v = serde_json::json!({
            "user": user,
            "month": reports[0],
            "previous": reports[1],
            "quota": quota,
        });
        crate::out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    crate::out!(
        "{}",
        usage_text(&user, &reports[0], &reports[1], quota.as_ref())
    );
    Ok(())
}

fn usage_text(user: &str, now: &Report, before: &Report, quota: Option<&UserQuota>) -> String {
    let util = |r: &Report| r.total.utilisation_text();
    let p = |r: &Report, f: fn(&labpool_reports::WaitRow) -> i64| {
        let mut all: Vec<(u64, i64)> = r
            .waits_by_partition
            .iter()
            .map(|w| (w.jobs, f(w)))
            .collect();
        all.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
        all.first().map_or("-".into(), |(_, s)| {
            labpool_units::format_elapsed(*s as u64)
        })
    };
    let rows = vec![
        vec![
            "GPU-hours".into(),
            format!("{:.1}", now.total.gpu_hours),
            format!("{:.1}", before.total.gpu_hours),
        ],
        vec!["jobs".into(), now.jobs.to_string(), before.jobs.to_string()],
        vec!["GPU utilisation".into(), util(now), util(before)],
        vec![
            "median wait".into(),
            p(now, |w| w.p50_s),
            p(before, |w| w.p50_s),
        ],
        vec![
            "95th percentile wait".into(),
            p(now, |w| w.p95_s),
            p(before, |w| w.p95_s),
        ],
        vec![
            "credits charged".into(),
            format!("{:.1}", now.credits.charged),
            format!("{:.1}", before.credits.charged),
        ],
        vec![
            "credits rebated".into(),
            format!("{:.1}", now.credits.rebated),
            format!("{:.1}", before.credits.rebated),
        ],
        vec![
            "energy".into(),
            now.energy_kwh.map_or("-".into(), |k| format!("{k:.2} kWh")),
            before
                .energy_kwh
                .map_or("-".into(), |k| format!("{k:.2} kWh")),
        ],
    ];
    let mut text = format!(
        "{user}: {} against {}\n{}",
        now.label,
        before.label,
        crate::render::table(&["", &now.label, &before.label], rows)
    );
    if let Some(q) = quota {
        for fs in &q.filesystems {
            let used = fs.usage.as_ref().map_or("not scanned yet".into(), |u| {
                labpool_units::format_size(u.bytes)
            });
            let limit = fs.limit.hard_bytes.map_or("no hard limit".into(), |h| {
                format!("of {}", labpool_units::format_size(h))
            });
            text.push_str(&format!("\n{}: {used} {limit}", fs.fs));
        }
    }
    if now.allocation_only && now.total.gpu_hours > 0.0 {
        text.push_str("\n(no GPU samples this month: utilisation and energy are not known)");
    }
    text
}
