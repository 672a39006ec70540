//! The report as one self-contained HTML page: inline CSS and inline SVG charts, no script, no
//! outside fetch, laid out to print cleanly to PDF from a browser.

use crate::charts::{bars, columns, count_bars, esc};
use crate::model::{LeaderRow, Report, UseRow, WaitRow};
use std::fmt::Write;

/// `1,234.5`-style hours.
fn hours(v: f64) -> String {
    format!("{v:.1}")
}

/// `3h 20m` from seconds: labpool's duration, to its two largest units.
fn wait(s: i64) -> String {
    labpool_units::format_duration_approx(std::time::Duration::from_secs(s.max(0) as u64))
}

fn use_table(title: &str, rows: &[UseRow]) -> String {
    let mut s = format!(
        "<h3>{}</h3><table><tr><th></th><th>jobs</th><th>GPU-hours</th><th>used GPU-hours</th><th>utilisation</th></tr>",
        esc(title)
    );
    for r in rows {
        let util = r.utilisation_text();
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{util}</td></tr>",
            esc(&r.key),
            r.jobs,
            hours(r.gpu_hours),
            hours(r.used_gpu_hours)
        );
    }
    s.push_str("</table>");
    s
}

fn wait_table(title: &str, rows: &[WaitRow]) -> String {
    let mut s = format!(
        "<h3>{}</h3><table><tr><th></th><th>jobs</th><th>p50</th><th>p90</th><th>p95</th></tr>",
        esc(title)
    );
    for w in rows {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&w.key),
            w.jobs,
            wait(w.p50_s),
            wait(w.p90_s),
            wait(w.p95_s)
        );
    }
    s.push_str("</table>");
    s
}

fn board(title: &str, rows: &[LeaderRow]) -> String {
    let mut s = format!(
        "<h3>{}</h3><table><tr><th>#</th><th>member</th><th>jobs</th><th>GPU-hours</th><th>utilisation</th></tr>",
        esc(title)
    );
    for l in rows {
        let util = l.util.map_or("-".into(), |u| format!("{u:.0}%"));
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{util}</td></tr>",
            l.rank,
            esc(&l.user),
            l.jobs,
            hours(l.gpu_hours)
        );
    }
    s.push_str("</table>");
    s
}

fn storage(st: &crate::model::Storage) -> String {
    let mut s = String::from("<section><h2>Storage (now)</h2>");
    if !st.quotas.is_empty() {
        s.push_str("<table><tr><th>member</th><th>file system</th><th>used</th><th>soft</th><th>hard</th></tr>");
        for q in &st.quotas {
            let lim = |v: Option<u64>| v.map_or("-".into(), labpool_units::format_size);
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&q.user),
                esc(&q.fs),
                labpool_units::format_size(q.used_bytes),
                lim(q.soft_bytes),
                lim(q.hard_bytes)
            );
        }
        s.push_str("</table>");
    }
    if let (Some(l), Some(b)) = (st.snapshot_logical_bytes, st.snapshot_stored_bytes) {
        let _ = write!(
            s,
            "<p>Snapshots hold {} of files in {} on disk{}.</p>",
            labpool_units::format_size(l),
            labpool_units::format_size(b),
            st.dedup_ratio().map_or(String::new(), |d| format!(
                ": deduplication and compression save {d:.1}x"
            ))
        );
    }
    if let Some((_, files, bytes)) = st.last_purge {
        let _ = write!(
            s,
            "<p>The last scratch purge reclaimed {} in {files} files.</p>",
            labpool_units::format_size(bytes)
        );
    }
    s.push_str("</section>");
    s
}

const STYLE: &str = "body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border-bottom:1px solid #ccc;padding:.2em .8em;text-align:right}\
td:first-child,th:first-child{text-align:left}.bar{fill:#3b6ea8}svg text{font-size:12px}\
figure{margin:1em 0}figcaption{font-weight:bold;margin-bottom:.3em}.note{color:#666}\
@media print{body{margin:0}section{break-inside:avoid}}";

/// The what-if replay: waits recorded, replayed on today's pool, and with the nodes added.
fn what_if(w: &crate::model::WhatIf) -> String {
    let row = |name: &str, (p50, p95): (f64, f64), util: Option<f64>| {
        format!(
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(name),
            wait(p50 as i64),
            wait(p95 as i64),
            util.map_or("-".into(), |u| format!("{:.0}%", 100.0 * u))
        )
    };
    format!(
        "<section><h2>What if: {added}</h2><p>With {added}, the p95 wait goes from {} to {} (the {} GPU jobs of the range replayed through labpool's own scheduler, with their real submit times and run times).</p><table><tr><th></th><th>p50 wait</th><th>p95 wait</th><th>GPU utilisation</th></tr>{}{}{}</table></section>",
        wait(w.today_wait_s.1 as i64),
        wait(w.proposed_wait_s.1 as i64),
        w.jobs,
        row("recorded", w.recorded_wait_s, None),
        row("replayed, today's pool", w.today_wait_s, Some(w.util.0)),
        row(
            &format!("replayed, with {}", w.added),
            w.proposed_wait_s,
            Some(w.util.1)
        ),
        added = esc(&w.added),
    )
}

/// The HTML page.
pub fn to_html(r: &Report) -> String {
    let mut s = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>labpool usage {}</title><style>{STYLE}</style></head><body><h1>GPU pool usage: {}</h1>",
        esc(&r.label),
        esc(&r.label)
    );
    let _ = write!(
        s,
        "<section><h2>Use</h2><p>{}. {} in the range, {} of them held GPUs: {} GPU-hours, {:.1}% of the pool. {} GPU-hours left idle while jobs waited.</p>",
        labpool_units::count(u64::from(r.pool_gpus), "GPU"),
        labpool_units::count(r.jobs, "job"),
        r.total.jobs,
        hours(r.total.gpu_hours),
        r.utilisation,
        hours(r.idle_with_demand_gpu_hours)
    );
    if r.allocation_only {
        s.push_str("<p class=\"note\">No job in this range was sampled by NVML: figures are allocation only.</p>");
    }
    s.push_str(&columns("Pool utilisation by day (%)", &r.by_day, 100.0));
    let user_bars: Vec<(String, f64)> = r
        .by_user
        .iter()
        .map(|u| (u.key.clone(), u.gpu_hours))
        .collect();
    s.push_str(&bars("GPU-hours by user", &user_bars, " h"));
    s.push_str(&use_table("By user", &r.by_user));
    s.push_str(&use_table("By account", &r.by_account));
    s.push_str(&use_table("By GPU type", &r.by_gpu_type));
    s.push_str(&use_table("By partition", &r.by_partition));
    s.push_str("</section><section><h2>Waiting and outcomes</h2>");
    s.push_str(&wait_table("Waits by partition", &r.waits_by_partition));
    s.push_str(&wait_table("Waits by job size", &r.waits_by_size));
    s.push_str(&count_bars("Jobs by outcome", &r.outcomes));
    let c = &r.credits;
    let _ = write!(
        s,
        "</section><section><h2>Credits and energy</h2><p>Charged {:.1}, granted {:.1}, rebated {:.1}; {} emergency tokens used.</p>",
        c.charged, c.granted, c.rebated, c.emergency_tokens
    );
    match r.energy_kwh {
        Some(kwh) => {
            let _ = write!(
                s,
                "<p>GPU energy of the sampled jobs that ended in the range: {kwh:.2} kWh.</p>"
            );
        }
        None => s.push_str("<p class=\"note\">No power samples in this range.</p>"),
    }
    s.push_str("</section>");
    if let Some(st) = &r.storage {
        s.push_str(&storage(st));
    }
    match &r.forecast {
        Some(f) => {
            let _ = write!(
                s,
                "<section><h2>Demand forecast</h2><p>The next 30 days: about {:.0} GPU-hours wanted; the weekly trend is {:+.1} GPU-hours a week.</p>",
                f.next_30_days_gpu_hours, f.trend_per_week
            );
            s.push_str(&bars(
                "GPU-hours wanted per weekday (a week)",
                &f.by_weekday,
                " h",
            ));
            let hours: Vec<(String, f64)> = f
                .by_hour
                .iter()
                .map(|(h, v)| (format!("{h:02}:00"), *v))
                .collect();
            let top = hours.iter().map(|(_, v)| *v).fold(0.0, f64::max);
            s.push_str(&columns(
                "GPU-hours wanted per hour of the day (a week)",
                &hours,
                top,
            ));
            s.push_str("</section>");
        }
        None => {
            s.push_str("<p class=\"note\">No forecast: the range is shorter than two weeks.</p>")
        }
    }
    if let Some(w) = &r.what_if {
        s.push_str(&what_if(w));
    }
    if let (Some(l), Some(e)) = (&r.leaderboard, &r.efficiency) {
        s.push_str("<section><h2>Leaderboard</h2>");
        s.push_str(&board("Most GPU-hours", l));
        s.push_str(&board("Most efficient (utilisation)", e));
        s.push_str("</section>");
    }
    s.push_str("<p class=\"note\">Every figure is defined in labpool's README, section \"Reports\".</p></body></html>\n");
    s
}
