//! The report as CSV in long form, one figure a line (`section,key,metric,value`), so a
//! spreadsheet pivots it however it likes and a script reads it back without knowing the layout.

use crate::model::{Report, UseRow, WaitRow};

/// The text being written, quoted as RFC 4180 says by the csv crate.
type Out = ::csv::Writer<Vec<u8>>;

fn line(out: &mut Out, section: &str, key: &str, metric: &str, value: impl std::fmt::Display) {
    out.write_record([section, key, metric, &value.to_string()])
        .expect("writing to memory cannot fail");
}

fn uses(out: &mut Out, section: &str, rows: &[UseRow]) {
    for r in rows {
        line(out, section, &r.key, "jobs", r.jobs);
        line(out, section, &r.key, "gpu_hours", r.gpu_hours);
        line(out, section, &r.key, "used_gpu_hours", r.used_gpu_hours);
        line(
            out,
            section,
            &r.key,
            "sampled_gpu_hours",
            r.sampled_gpu_hours,
        );
    }
}

fn waits(out: &mut Out, section: &str, rows: &[WaitRow]) {
    for w in rows {
        line(out, section, &w.key, "jobs", w.jobs);
        line(out, section, &w.key, "p50_s", w.p50_s);
        line(out, section, &w.key, "p90_s", w.p90_s);
        line(out, section, &w.key, "p95_s", w.p95_s);
    }
}

/// The CSV text.
pub fn to_csv(r: &Report) -> String {
    let mut out = ::csv::Writer::from_writer(Vec::new());
    out.write_record(["section", "key", "metric", "value"])
        .expect("writing to memory cannot fail");
    line(&mut out, "range", &r.label, "from_ms", r.from_ms);
    line(&mut out, "range", &r.label, "to_ms", r.to_ms);
    line(&mut out, "range", &r.label, "until_ms", r.until_ms);
    line(&mut out, "pool", "all", "gpus", r.pool_gpus);
    line(&mut out, "pool", "all", "jobs", r.jobs);
    line(
        &mut out,
        "pool",
        "all",
        "utilisation_percent",
        r.utilisation,
    );
    line(
        &mut out,
        "pool",
        "all",
        "idle_with_demand_gpu_hours",
        r.idle_with_demand_gpu_hours,
    );
    line(
        &mut out,
        "pool",
        "all",
        "allocation_only",
        r.allocation_only,
    );
    uses(&mut out, "use_total", std::slice::from_ref(&r.total));
    uses(&mut out, "use_by_user", &r.by_user);
    uses(&mut out, "use_by_account", &r.by_account);
    uses(&mut out, "use_by_gpu_type", &r.by_gpu_type);
    uses(&mut out, "use_by_partition", &r.by_partition);
    for (day, pct) in &r.by_day {
        line(&mut out, "utilisation_by_day", day, "percent", pct);
    }
    waits(&mut out, "waits_by_partition", &r.waits_by_partition);
    waits(&mut out, "waits_by_size", &r.waits_by_size);
    for (state, n) in &r.outcomes {
        line(&mut out, "outcomes", state, "jobs", n);
    }
    line(&mut out, "credits", "all", "charged", r.credits.charged);
    line(&mut out, "credits", "all", "granted", r.credits.granted);
    line(&mut out, "credits", "all", "rebated", r.credits.rebated);
    line(
        &mut out,
        "credits",
        "all",
        "emergency_tokens",
        r.credits.emergency_tokens,
    );
    if let Some(kwh) = r.energy_kwh {
        line(&mut out, "energy", "all", "kwh", kwh);
    }
    if let Some(st) = &r.storage {
        for q in &st.quotas {
            let key = format!("{}/{}", q.user, q.fs);
            line(&mut out, "storage_quota", &key, "used_bytes", q.used_bytes);
            if let Some(h) = q.hard_bytes {
                line(&mut out, "storage_quota", &key, "hard_bytes", h);
            }
        }
        if let Some(b) = st.snapshot_stored_bytes {
            line(&mut out, "storage_snapshots", "all", "stored_bytes", b);
        }
        if let Some(b) = st.snapshot_logical_bytes {
            line(&mut out, "storage_snapshots", "all", "logical_bytes", b);
        }
        if let Some(d) = st.dedup_ratio() {
            line(
                &mut out,
                "storage_snapshots",
                "all",
                "dedup_ratio",
                format!("{d:.2}"),
            );
        }
        if let Some((at, files, bytes)) = st.last_purge {
            line(&mut out, "storage_purge", "last", "at_ms", at);
            line(&mut out, "storage_purge", "last", "files", files);
            line(&mut out, "storage_purge", "last", "bytes", bytes);
        }
    }
    if let Some(f) = &r.forecast {
        line(
            &mut out,
            "forecast",
            "all",
            "next_30_days_gpu_hours",
            f.next_30_days_gpu_hours,
        );
        line(
            &mut out,
            "forecast",
            "all",
            "trend_per_week",
            f.trend_per_week,
        );
        for (day, v) in &f.by_weekday {
            line(&mut out, "forecast_by_weekday", day, "gpu_hours", v);
        }
        for (hour, v) in &f.by_hour {
            line(
                &mut out,
                "forecast_by_hour",
                &format!("{hour:02}"),
                "gpu_hours",
                v,
            );
        }
    }
    if let Some(w) = &r.what_if {
        line(&mut out, "what_if", &w.added, "jobs", w.jobs);
        for (key, (p50, p95)) in [
            ("recorded", w.recorded_wait_s),
            ("today", w.today_wait_s),
            ("proposed", w.proposed_wait_s),
        ] {
            line(&mut out, "what_if", key, "p50_wait_s", p50);
            line(&mut out, "what_if", key, "p95_wait_s", p95);
        }
        line(&mut out, "what_if", "today", "gpu_util", w.util.0);
        line(&mut out, "what_if", "proposed", "gpu_util", w.util.1);
    }
    for (section, board) in [
        ("leaderboard", &r.leaderboard),
        ("efficiency", &r.efficiency),
    ] {
        for l in board.iter().flatten() {
            line(&mut out, section, &l.user, "rank", l.rank);
            line(&mut out, section, &l.user, "gpu_hours", l.gpu_hours);
            if let Some(u) = l.util {
                line(&mut out, section, &l.user, "util_percent", u);
            }
        }
    }
    let bytes = out.into_inner().expect("writing to memory cannot fail");
    String::from_utf8(bytes).expect("every field is UTF-8")
}
