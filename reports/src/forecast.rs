//! A demand forecast by weekday and hour, with a trend: how many GPUs the lab will want at each
//! hour of the week, from what it wanted before. A job wants its GPUs from its submit time for
//! as long as it ran (whether or not it had to wait for them), so demand is the mean number of
//! GPUs wanted in each of the 168 hours of a week, free of the pool's own size.
//!
//! The model: each hour of the week gets the mean of that hour over the past weeks (up to
//! [`WEEKS`]), smoothed with its neighbours one hour either side, then scaled so the week's total
//! follows the least-squares trend of the weekly totals. The naive seasonal baseline it is
//! measured against repeats last week.

/// Weeks of history a forecast looks at: 3 did best in the backtest on the shipped trace (see
/// docs/benchmarks.md); more weeks lag a lab whose demand moves, fewer make the trend noise.
pub const WEEKS: usize = 3;

const WEEK_MS: i64 = 7 * 86_400_000;
const HOUR_MS: i64 = 3_600_000;

/// One job's demand: the GPUs it wanted, from its submit time for as long as it ran.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Demand {
    /// Submitted, ms.
    pub at_ms: i64,
    /// How long it ran, ms.
    pub for_ms: i64,
    /// GPUs.
    pub gpus: f64,
}

/// The mean GPUs wanted in each hour of the week that ends at `end_ms`, slot 0 being the week's
/// first hour.
pub fn week(history: &[Demand], end_ms: i64) -> Vec<f64> {
    let start = end_ms - WEEK_MS;
    let mut slots = vec![0.0; 168];
    for d in history {
        let (a, b) = (d.at_ms.max(start), (d.at_ms + d.for_ms).min(end_ms));
        let mut t = a;
        while t < b {
            let slot = (t - start) / HOUR_MS;
            let slot_end = start + (slot + 1) * HOUR_MS;
            let until = slot_end.min(b);
            slots[slot as usize] += d.gpus * (until - t) as f64 / HOUR_MS as f64;
            t = until;
        }
    }
    slots
}

/// The forecast for the week after `end_ms`, from up to [`WEEKS`] weeks before it: one value per
/// hour of that week, and the trend of the weekly totals (GPU-hours per week, per week).
pub fn forecast(history: &[Demand], end_ms: i64) -> (Vec<f64>, f64) {
    forecast_with(history, end_ms, WEEKS, true, true)
}

/// The model with its knobs: weeks looked at, smoothing, trend.
pub fn forecast_with(
    history: &[Demand],
    end_ms: i64,
    n_weeks: usize,
    smoothing: bool,
    trending: bool,
) -> (Vec<f64>, f64) {
    let first = history.iter().map(|d| d.at_ms).min().unwrap_or(end_ms);
    let weeks: Vec<Vec<f64>> = (0..n_weeks as i64)
        .map(|k| end_ms - k * WEEK_MS)
        .filter(|e| e - WEEK_MS >= first)
        .map(|e| week(history, e))
        .collect();
    if weeks.is_empty() {
        return (vec![0.0; 168], 0.0);
    }
    let n = weeks.len() as f64;
    let mean: Vec<f64> = (0..168)
        .map(|s| weeks.iter().map(|w| w[s]).sum::<f64>() / n)
        .collect();
    let smooth: Vec<f64> = if smoothing {
        (0..168)
            .map(|s| (mean[(s + 167) % 168] + 2.0 * mean[s] + mean[(s + 1) % 168]) / 4.0)
            .collect()
    } else {
        mean.clone()
    };
    if !trending {
        return (smooth, 0.0);
    }
    // Weekly totals, oldest first, against their week number.
    let totals: Vec<f64> = weeks.iter().rev().map(|w| w.iter().sum()).collect();
    let (slope, next) = trend(&totals);
    let profile: f64 = smooth.iter().sum();
    let scale = if profile > 0.0 {
        next.max(0.0) / profile
    } else {
        0.0
    };
    (smooth.iter().map(|v| v * scale).collect(), slope)
}

/// Least-squares line through `ys` at x = 0, 1, …: its slope, and its value at the next x.
fn trend(ys: &[f64]) -> (f64, f64) {
    let n = ys.len() as f64;
    if ys.len() < 2 {
        return (0.0, ys.first().copied().unwrap_or(0.0));
    }
    let mx = (n - 1.0) / 2.0;
    let my = ys.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f64 - mx;
        sxy += dx * (y - my);
        sxx += dx * dx;
    }
    let slope = sxy / sxx;
    (slope, my + slope * (n - mx))
}

/// Mean absolute error of a forecast against what happened, per hour of the week.
pub fn mae(forecast: &[f64], actual: &[f64]) -> f64 {
    forecast
        .iter()
        .zip(actual)
        .map(|(f, a)| (f - a).abs())
        .sum::<f64>()
        / actual.len().max(1) as f64
}

/// A backtest over `history`: for every week after the first `warmup`, the model's forecast
/// and the naive one (last week again) against what came. Returns (model MAE, naive MAE, weeks
/// tested), each MAE the mean over the weeks.
pub fn backtest(history: &[Demand], warmup: usize) -> (f64, f64, usize) {
    backtest_with(history, warmup, WEEKS, true, true)
}

/// [`backtest`] with the model's knobs.
pub fn backtest_with(
    history: &[Demand],
    warmup: usize,
    n_weeks: usize,
    smoothing: bool,
    trending: bool,
) -> (f64, f64, usize) {
    let (Some(first), Some(last)) = (
        history.iter().map(|d| d.at_ms).min(),
        history.iter().map(|d| d.at_ms + d.for_ms).max(),
    ) else {
        return (0.0, 0.0, 0);
    };
    let (mut model, mut naive, mut n) = (0.0, 0.0, 0);
    let mut end = first + (warmup as i64) * WEEK_MS;
    while end + WEEK_MS <= last + 1 {
        let actual = week(history, end + WEEK_MS);
        model += mae(
            &forecast_with(history, end, n_weeks, smoothing, trending).0,
            &actual,
        );
        naive += mae(&week(history, end), &actual);
        n += 1;
        end += WEEK_MS;
    }
    if n == 0 {
        return (0.0, 0.0, 0);
    }
    (model / n as f64, naive / n as f64, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_weekly_pattern_is_forecast_and_a_growing_one_trends_up() {
        // Every week, 4 GPUs wanted for the hour at slot 10, for 6 weeks; then growth of 1 a week.
        let at = |w: i64, gpus: f64| Demand {
            at_ms: w * WEEK_MS + 10 * HOUR_MS,
            for_ms: HOUR_MS,
            gpus,
        };
        let steady: Vec<Demand> = (0..6).map(|w| at(w, 4.0)).collect();
        let (f, slope) = forecast(&steady, 6 * WEEK_MS);
        assert!((f.iter().sum::<f64>() - 4.0).abs() < 1e-9);
        assert!(
            (f[10] - 2.0).abs() < 1e-9 && (f[9] - 1.0).abs() < 1e-9,
            "smoothed over neighbours"
        );
        assert!(slope.abs() < 1e-9);
        let growing: Vec<Demand> = (0..6).map(|w| at(w, 4.0 + w as f64)).collect();
        let (f, slope) = forecast(&growing, 6 * WEEK_MS);
        assert!((slope - 1.0).abs() < 1e-9);
        assert!(
            (f.iter().sum::<f64>() - 10.0).abs() < 1e-9,
            "the trend's next week"
        );
    }
}
