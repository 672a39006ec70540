//! The figures. Each is defined where it is computed; docs/admin/reports.md says the
//! same in words.

use crate::model::*;
use std::collections::BTreeMap;

const HOUR_MS: f64 = 3_600_000.0;
const DAY_MS: i64 = 86_400_000;

/// The part of [a, b) inside [from, to), ms.
fn overlap(a: i64, b: i64, from: i64, to: i64) -> i64 {
    (b.min(to) - a.max(from)).max(0)
}

/// A job's held interval: start to end, or to `until` (the range's end, or now in a range
/// still in progress) while it runs. Nothing is held after `until`.
fn held(j: &JobRecord, until: i64) -> Option<(i64, i64)> {
    let start = j.start_ms.filter(|s| *s < until)?;
    Some((start, j.end_ms.unwrap_or(until).min(until)))
}

/// A job's asked-for interval: submit until it started, or until it ended without starting
/// (cancelled while pending), or to `until` while it still waits.
fn asked(j: &JobRecord, until: i64) -> (i64, i64) {
    let stop = j.start_ms.or(j.end_ms).unwrap_or(until).min(until);
    (j.submit_ms.min(stop), stop)
}

/// Whether a job belongs to the range: submitted before it ended, and not over before it
/// began.
fn in_range(j: &JobRecord, from: i64, until: i64) -> bool {
    j.submit_ms < until && j.end_ms.is_none_or(|e| e >= from)
}

/// A job's state at `until`: its own when it ended by then, else `RUNNING` or `PENDING`.
fn state_at(j: &JobRecord, until: i64) -> String {
    match (j.end_ms, j.start_ms) {
        (Some(e), _) if e < until => j.state.clone(),
        (_, Some(s)) if s < until => "RUNNING".into(),
        _ => "PENDING".into(),
    }
}

/// Nearest-rank percentile of sorted values: the smallest value with at least q of them at or
/// below it.
pub fn percentile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// The size group a job's wait is counted in.
pub fn size_group(gpus: u32) -> &'static str {
    match gpus {
        0 => "0 GPUs",
        1 => "1 GPU",
        2..=4 => "2-4 GPUs",
        5..=8 => "5-8 GPUs",
        _ => "over 8 GPUs",
    }
}

/// `YYYY-MM-DD` of a day number since the epoch (civil calendar).
pub fn date_of_day(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn group(input: &Input, key: impl Fn(&JobRecord) -> String) -> Vec<UseRow> {
    let mut rows: BTreeMap<String, UseRow> = BTreeMap::new();
    let until = input.until_ms();
    for j in &input.jobs {
        let Some((a, b)) = held(j, until) else {
            continue;
        };
        let ms = overlap(a, b, input.from_ms, until);
        if ms == 0 || j.gpus == 0 {
            continue;
        }
        let k = key(j);
        let r = rows.entry(k.clone()).or_insert_with(|| UseRow {
            key: k,
            ..UseRow::default()
        });
        let hours = j.gpu_weight() * ms as f64 / HOUR_MS;
        r.jobs += 1;
        r.gpu_hours += hours;
        if let Some(u) = j.util_mean {
            r.sampled_gpu_hours += hours;
            r.used_gpu_hours += hours * u / 100.0;
        }
    }
    let mut out: Vec<UseRow> = rows.into_values().collect();
    out.sort_by(|a, b| b.gpu_hours.total_cmp(&a.gpu_hours).then(a.key.cmp(&b.key)));
    out
}

fn waits(input: &Input, key: impl Fn(&JobRecord) -> String) -> Vec<WaitRow> {
    let mut groups: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for j in &input.jobs {
        if let Some(s) = j
            .start_ms
            .filter(|s| (input.from_ms..input.until_ms()).contains(s))
        {
            groups
                .entry(key(j))
                .or_default()
                .push((s - j.submit_ms).max(0) / 1000);
        }
    }
    groups
        .into_iter()
        .map(|(key, mut w)| {
            w.sort_unstable();
            WaitRow {
                key,
                jobs: w.len() as u64,
                p50_s: percentile(&w, 0.5),
                p90_s: percentile(&w, 0.9),
                p95_s: percentile(&w, 0.95),
            }
        })
        .collect()
}

/// GPU-hours left idle while jobs waited for GPUs: over every stretch of the range, the idle
/// GPUs (the pool's less those held) or the GPUs waiting jobs asked for, whichever is fewer.
fn idle_with_demand(input: &Input) -> f64 {
    // (time, change in held GPUs, change in asked-for GPUs), clipped to the range.
    let until = input.until_ms();
    let mut events: Vec<(i64, i64, i64)> = Vec::new();
    let clip = |t: i64| t.clamp(input.from_ms, until);
    for j in &input.jobs {
        let g = i64::from(j.gpus);
        if g == 0 {
            continue;
        }
        let (a, b) = asked(j, until);
        events.push((clip(a), 0, g));
        events.push((clip(b), 0, -g));
        if let Some((a, b)) = held(j, until) {
            events.push((clip(a), g, 0));
            events.push((clip(b), -g, 0));
        }
    }
    events.sort_unstable();
    let (mut held_now, mut asked, mut last, mut total) = (0i64, 0i64, input.from_ms, 0f64);
    for (t, dh, da) in events {
        if t > last {
            let idle = (i64::from(input.pool_gpus) - held_now).max(0);
            total += idle.min(asked.max(0)) as f64 * (t - last) as f64 / HOUR_MS;
            last = t;
        }
        held_now += dh;
        asked += da;
    }
    total
}

/// Pool utilisation of each day of the range that has begun; today's counts up to now.
fn by_day(input: &Input) -> Vec<(String, f64)> {
    let until = input.until_ms();
    if until <= input.from_ms {
        return Vec::new();
    }
    let offset = i64::from(input.utc_offset_min) * 60_000;
    let first = (input.from_ms + offset).div_euclid(DAY_MS);
    let last = (until - 1 + offset).div_euclid(DAY_MS);
    let capacity = f64::from(input.pool_gpus) * 24.0;
    (first..=last)
        .map(|day| {
            let (a, b) = (day * DAY_MS - offset, (day + 1) * DAY_MS - offset);
            let (a, b) = (a.max(input.from_ms), b.min(until));
            let hours: f64 = input
                .jobs
                .iter()
                .filter_map(|j| held(j, until).map(|(s, e)| (j, s, e)))
                .map(|(j, s, e)| j.gpu_weight() * overlap(s, e, a, b) as f64 / HOUR_MS)
                .sum();
            let cap = capacity * (b - a) as f64 / DAY_MS as f64;
            let pct = if cap > 0.0 { 100.0 * hours / cap } else { 0.0 };
            (date_of_day(day), round(pct, 1))
        })
        .collect()
}

fn round(v: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (v * f).round() / f
}

/// GPU-hours are kept to 4 places (a third of a GPU-second), so that the same history always
/// gives the same figures, bytes included.
fn round_row(mut r: UseRow) -> UseRow {
    r.gpu_hours = round(r.gpu_hours, 4);
    r.used_gpu_hours = round(r.used_gpu_hours, 4);
    r.sampled_gpu_hours = round(r.sampled_gpu_hours, 4);
    r
}

fn leaders(
    by_user: &[UseRow],
    setting: Leaderboard,
) -> (Option<Vec<LeaderRow>>, Option<Vec<LeaderRow>>) {
    if setting == Leaderboard::Off {
        return (None, None);
    }
    let util = |r: &UseRow| {
        (r.sampled_gpu_hours > 0.0)
            .then(|| round(100.0 * r.used_gpu_hours / r.sampled_gpu_hours, 1))
    };
    let name = |rank: usize, r: &UseRow| match setting {
        Leaderboard::Anonymous => format!("member {rank}"),
        _ => r.key.clone(),
    };
    let board: Vec<LeaderRow> = by_user
        .iter()
        .enumerate()
        .map(|(i, r)| LeaderRow {
            rank: i as u32 + 1,
            user: name(i + 1, r),
            jobs: r.jobs,
            gpu_hours: r.gpu_hours,
            util: util(r),
        })
        .collect();
    let mut sampled: Vec<&UseRow> = by_user.iter().filter(|r| util(r).is_some()).collect();
    sampled.sort_by(|a, b| {
        util(b)
            .unwrap_or(0.0)
            .total_cmp(&util(a).unwrap_or(0.0))
            .then(a.key.cmp(&b.key))
    });
    let efficiency = sampled
        .iter()
        .enumerate()
        .map(|(i, r)| LeaderRow {
            rank: i as u32 + 1,
            user: match setting {
                // Anonymous names follow the GPU-hours board, so one member is one number.
                Leaderboard::Anonymous => {
                    let pos = by_user.iter().position(|u| u.key == r.key).unwrap_or(0);
                    format!("member {}", pos + 1)
                }
                _ => r.key.clone(),
            },
            jobs: r.jobs,
            gpu_hours: r.gpu_hours,
            util: util(r),
        })
        .collect();
    (Some(board), Some(efficiency))
}

/// The forecast from the range's own demand (jobs submitted in it that ran), when the range
/// holds two weeks or more.
fn forecast(input: &Input) -> Option<ForecastView> {
    use crate::forecast::{Demand, forecast};
    let until = input.until_ms();
    if until - input.from_ms < 14 * DAY_MS {
        return None;
    }
    let demand: Vec<Demand> = input
        .jobs
        .iter()
        .filter(|j| (input.from_ms..until).contains(&j.submit_ms))
        .filter_map(|j| {
            let (a, b) = held(j, until)?;
            Some(Demand {
                at_ms: j.submit_ms,
                for_ms: b - a,
                gpus: j.gpu_weight(),
            })
        })
        .collect();
    let (slots, slope) = forecast(&demand, until);
    let start = until;
    let offset = i64::from(input.utc_offset_min) * 60_000;
    let names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    let (mut by_weekday, mut by_hour) = (vec![0.0; 7], vec![0.0; 24]);
    for (s, v) in slots.iter().enumerate() {
        let t = start + s as i64 * 3_600_000 + offset;
        // 1970-01-01 was a Thursday: day 0 is weekday 3, Monday being 0.
        by_weekday[((t.div_euclid(DAY_MS) + 3) % 7) as usize] += v;
        by_hour[(t.rem_euclid(DAY_MS) / 3_600_000) as usize] += v;
    }
    let week_total: f64 = slots.iter().sum();
    Some(ForecastView {
        next_30_days_gpu_hours: round(week_total * 30.0 / 7.0, 1),
        trend_per_week: round(slope, 2),
        by_weekday: names
            .iter()
            .zip(&by_weekday)
            .map(|(n, v)| (n.to_string(), round(*v, 2)))
            .collect(),
        by_hour: by_hour
            .iter()
            .enumerate()
            .map(|(h, v)| (h as u32, round(*v, 2)))
            .collect(),
    })
}

/// The report for `input`.
pub fn compute(input: &Input) -> Report {
    let by_user: Vec<UseRow> = group(input, |j| j.user.clone())
        .into_iter()
        .map(round_row)
        .collect();
    let total = group(input, |_| "all".to_string())
        .into_iter()
        .next()
        .map(round_row)
        .unwrap_or(UseRow {
            key: "all".into(),
            ..UseRow::default()
        });
    let until = input.until_ms();
    let range_hours = f64::from(input.pool_gpus) * (until - input.from_ms).max(0) as f64 / HOUR_MS;
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    let mut energy: Option<f64> = None;
    let mut jobs = 0;
    for j in input
        .jobs
        .iter()
        .filter(|j| in_range(j, input.from_ms, until))
    {
        jobs += 1;
        *outcomes.entry(state_at(j, until)).or_default() += 1;
        if let Some(joules) = j.energy_j.filter(|_| j.end_ms.is_some_and(|e| e < until)) {
            *energy.get_or_insert(0.0) += joules;
        }
    }
    let mut credits = CreditRow::default();
    for l in input
        .ledger
        .iter()
        .filter(|l| (input.from_ms..until).contains(&l.time_ms))
    {
        match l.kind.as_str() {
            "charge" => credits.charged += l.amount,
            "grant" => credits.granted += l.amount,
            "rebate" => credits.rebated += l.amount,
            "emergency_token" => credits.emergency_tokens += 1,
            _ => {}
        }
    }
    credits.charged = round(credits.charged, 3);
    credits.granted = round(credits.granted, 3);
    credits.rebated = round(credits.rebated, 3);
    let (leaderboard, efficiency) = leaders(&by_user, input.leaderboard);
    let label = if until < input.to_ms {
        // A range in progress says where its figures stop.
        let offset = i64::from(input.utc_offset_min) * 60_000;
        let local = until + offset;
        let minute = local.rem_euclid(DAY_MS) / 60_000;
        format!(
            "{} (to {} {:02}:{:02})",
            input.label,
            date_of_day(local.div_euclid(DAY_MS)),
            minute / 60,
            minute % 60
        )
    } else {
        input.label.clone()
    };
    let mut report = Report {
        label,
        from_ms: input.from_ms,
        to_ms: input.to_ms,
        until_ms: until,
        pool_gpus: input.pool_gpus,
        jobs,
        utilisation: if range_hours > 0.0 {
            round(100.0 * total.gpu_hours / range_hours, 1)
        } else {
            0.0
        },
        allocation_only: total.sampled_gpu_hours == 0.0,
        total,
        by_user,
        by_account: group(input, |j| j.account.clone().unwrap_or_else(|| "-".into()))
            .into_iter()
            .map(round_row)
            .collect(),
        by_gpu_type: group(input, |j| j.gpu_type.clone())
            .into_iter()
            .map(round_row)
            .collect(),
        by_partition: group(input, |j| j.partition.clone())
            .into_iter()
            .map(round_row)
            .collect(),
        idle_with_demand_gpu_hours: round(idle_with_demand(input), 4),
        by_day: by_day(input),
        waits_by_partition: waits(input, |j| j.partition.clone()),
        waits_by_size: waits(input, |j| size_group(j.gpus).to_string()),
        outcomes: outcomes.into_iter().collect(),
        credits,
        energy_kwh: energy.map(|j| round(j / 3.6e6, 4)),
        leaderboard,
        efficiency,
        forecast: forecast(input),
        storage: input.storage.clone(),
        what_if: None,
    };
    if input.leaderboard == Leaderboard::Anonymous {
        anonymise(&mut report);
    }
    report
}

/// With an anonymous leaderboard, no part of the report names a member: the by-user table and
/// the storage lines call each member by their number on the leaderboard (members with storage
/// and no jobs get the next numbers, in name order).
fn anonymise(r: &mut Report) {
    let mut names: std::collections::BTreeMap<String, String> = r
        .by_user
        .iter()
        .enumerate()
        .map(|(i, u)| (u.key.clone(), format!("member {}", i + 1)))
        .collect();
    for u in &mut r.by_user {
        u.key = names[&u.key].clone();
    }
    if let Some(st) = &mut r.storage {
        let mut rest: Vec<String> = st
            .quotas
            .iter()
            .map(|q| q.user.clone())
            .filter(|u| !names.contains_key(u))
            .collect();
        rest.sort();
        rest.dedup();
        for u in rest {
            let n = names.len() + 1;
            names.insert(u, format!("member {n}"));
        }
        for q in &mut st.quotas {
            q.user = names[&q.user].clone();
        }
    }
}

#[cfg(test)]
mod tests;
