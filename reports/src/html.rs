//! The report as one self-contained HTML page: inline CSS and inline SVG charts, no script, no
//! outside fetch, laid out to print cleanly to PDF from a browser. Written with maud, as the
//! dashboard is, so the page's text is escaped by the template; the charts are SVG strings of
//! their own ([`crate::charts`], which escapes its labels), put in as they are.

use crate::charts::{bars, columns, count_bars};
use crate::model::{LeaderRow, Report, UseRow, WaitRow};
use maud::{DOCTYPE, Markup, PreEscaped, html};

/// `1,234.5`-style hours.
fn hours(v: f64) -> String {
    format!("{v:.1}")
}

/// `3h 20m` from seconds: labpool's duration, to its two largest units.
fn wait(s: i64) -> String {
    labpool_units::format_duration_approx(std::time::Duration::from_secs(s.max(0) as u64))
}

fn use_table(title: &str, rows: &[UseRow]) -> Markup {
    html! {
        h3 { (title) }
        table {
            tr { th {} th { "jobs" } th { "GPU-hours" } th { "used GPU-hours" } th { "utilisation" } }
            @for r in rows {
                tr {
                    td { (r.key) } td { (r.jobs) } td { (hours(r.gpu_hours)) }
                    td { (hours(r.used_gpu_hours)) } td { (r.utilisation_text()) }
                }
            }
        }
    }
}

fn wait_table(title: &str, rows: &[WaitRow]) -> Markup {
    html! {
        h3 { (title) }
        table {
            tr { th {} th { "jobs" } th { "p50" } th { "p90" } th { "p95" } }
            @for w in rows {
                tr {
                    td { (w.key) } td { (w.jobs) } td { (wait(w.p50_s)) }
                    td { (wait(w.p90_s)) } td { (wait(w.p95_s)) }
                }
            }
        }
    }
}

fn board(title: &str, rows: &[LeaderRow]) -> Markup {
    html! {
        h3 { (title) }
        table {
            tr { th { "#" } th { "member" } th { "jobs" } th { "GPU-hours" } th { "utilisation" } }
            @for l in rows {
                tr {
                    td { (l.rank) } td { (l.user) } td { (l.jobs) } td { (hours(l.gpu_hours)) }
                    td { (l.util.map_or("-".into(), |u| format!("{u:.0}%"))) }
                }
            }
        }
    }
}

fn storage(st: &crate::model::Storage) -> Markup {
    let lim = |v: Option<u64>| v.map_or("-".into(), labpool_units::format_size);
    html! {
        section {
            h2 { "Storage (now)" }
            @if !st.quotas.is_empty() {
                table {
                    tr { th { "member" } th { "file system" } th { "used" } th { "soft" } th { "hard" } }
                    @for q in &st.quotas {
                        tr {
                            td { (q.user) } td { (q.fs) } td { (labpool_units::format_size(q.used_bytes)) }
                            td { (lim(q.soft_bytes)) } td { (lim(q.hard_bytes)) }
                        }
                    }
                }
            }
            @if let (Some(l), Some(b)) = (st.snapshot_logical_bytes, st.snapshot_stored_bytes) {
                p {
                    "Snapshots hold " (labpool_units::format_size(l)) " of files in "
                    (labpool_units::format_size(b)) " on disk"
                    @if let Some(d) = st.dedup_ratio() {
                        ": deduplication and compression save " (format!("{d:.1}")) "x"
                    }
                    "."
                }
            }
            @if let Some((_, files, bytes)) = st.last_purge {
                p {
                    "The last scratch purge reclaimed " (labpool_units::format_size(bytes))
                    " in " (files) " files."
                }
            }
        }
    }
}

const STYLE: &str = "body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border-bottom:1px solid #ccc;padding:.2em .8em;text-align:right}\
td:first-child,th:first-child{text-align:left}.bar{fill:#3b6ea8}svg text{font-size:12px}\
figure{margin:1em 0}figcaption{font-weight:bold;margin-bottom:.3em}.note{color:#666}\
@media print{body{margin:0}section{break-inside:avoid}}";

/// The what-if replay: waits recorded, replayed on today's pool, and with the nodes added.
fn what_if(w: &crate::model::WhatIf) -> Markup {
    let rows = [
        ("recorded".to_string(), w.recorded_wait_s, None),
        (
            "replayed, today's pool".to_string(),
            w.today_wait_s,
            Some(w.util.0),
        ),
        (
            format!("replayed, with {}", w.added),
            w.proposed_wait_s,
            Some(w.util.1),
        ),
    ];
    html! {
        section {
            h2 { "What if: " (w.added) }
            p {
                "With " (w.added) ", the p95 wait goes from " (wait(w.today_wait_s.1 as i64))
                " to " (wait(w.proposed_wait_s.1 as i64)) " (the " (w.jobs)
                " GPU jobs of the range replayed through labpool's own scheduler, with their real submit times and run times)."
            }
            table {
                tr { th {} th { "p50 wait" } th { "p95 wait" } th { "GPU utilisation" } }
                @for (name, (p50, p95), util) in &rows {
                    tr {
                        td { (name) }
                        td class="num" { (wait(*p50 as i64)) }
                        td class="num" { (wait(*p95 as i64)) }
                        td class="num" { (util.map_or("-".into(), |u| format!("{:.0}%", 100.0 * u))) }
                    }
                }
            }
        }
    }
}

fn forecast(f: &crate::model::ForecastView) -> Markup {
    let hours: Vec<(String, f64)> = f
        .by_hour
        .iter()
        .map(|(h, v)| (format!("{h:02}:00"), *v))
        .collect();
    let top = hours.iter().map(|(_, v)| *v).fold(0.0, f64::max);
    html! {
        section {
            h2 { "Demand forecast" }
            p {
                "The next 30 days: about " (format!("{:.0}", f.next_30_days_gpu_hours))
                " GPU-hours wanted; the weekly trend is " (format!("{:+.1}", f.trend_per_week))
                " GPU-hours a week."
            }
            (PreEscaped(bars("GPU-hours wanted per weekday (a week)", &f.by_weekday, " h")))
            (PreEscaped(columns("GPU-hours wanted per hour of the day (a week)", &hours, top)))
        }
    }
}

/// The HTML page.
pub fn to_html(r: &Report) -> String {
    let user_bars: Vec<(String, f64)> = r
        .by_user
        .iter()
        .map(|u| (u.key.clone(), u.gpu_hours))
        .collect();
    let c = &r.credits;
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "labpool usage " (r.label) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { "GPU pool usage: " (r.label) }
                section {
                    h2 { "Use" }
                    p {
                        (labpool_units::count(u64::from(r.pool_gpus), "GPU")) ". "
                        (labpool_units::count(r.jobs, "job")) " in the range, " (r.total.jobs)
                        " of them held GPUs: " (hours(r.total.gpu_hours)) " GPU-hours, "
                        (format!("{:.1}", r.utilisation)) "% of the pool. "
                        (hours(r.idle_with_demand_gpu_hours)) " GPU-hours left idle while jobs waited."
                    }
                    @if r.allocation_only {
                        p class="note" { "No job in this range was sampled by NVML: figures are allocation only." }
                    }
                    (PreEscaped(columns("Pool utilisation by day (%)", &r.by_day, 100.0)))
                    (PreEscaped(bars("GPU-hours by user", &user_bars, " h")))
                    (use_table("By user", &r.by_user))
                    (use_table("By account", &r.by_account))
                    (use_table("By GPU type", &r.by_gpu_type))
                    (use_table("By partition", &r.by_partition))
                }
                section {
                    h2 { "Waiting and outcomes" }
                    (wait_table("Waits by partition", &r.waits_by_partition))
                    (wait_table("Waits by job size", &r.waits_by_size))
                    (PreEscaped(count_bars("Jobs by outcome", &r.outcomes)))
                }
                section {
                    h2 { "Credits and energy" }
                    p {
                        "Charged " (format!("{:.1}", c.charged)) ", granted " (format!("{:.1}", c.granted))
                        ", rebated " (format!("{:.1}", c.rebated)) "; " (c.emergency_tokens)
                        " emergency tokens used."
                    }
                    @match r.energy_kwh {
                        Some(kwh) => p { "GPU energy of the sampled jobs that ended in the range: " (format!("{kwh:.2}")) " kWh." },
                        None => p class="note" { "No power samples in this range." },
                    }
                }
                @if let Some(st) = &r.storage { (storage(st)) }
                @match &r.forecast {
                    Some(f) => (forecast(f)),
                    None => p class="note" { "No forecast: the range is shorter than two weeks." },
                }
                @if let Some(w) = &r.what_if { (what_if(w)) }
                @if let (Some(l), Some(e)) = (&r.leaderboard, &r.efficiency) {
                    section {
                        h2 { "Leaderboard" }
                        (board("Most GPU-hours", l))
                        (board("Most efficient (utilisation)", e))
                    }
                }
                p class="note" { "Every figure is defined in labpool's admin guide: docs/admin/reports.md." }
            }
        }
    };
    let mut out = page.into_string();
    out.push('\n');
    out
}
