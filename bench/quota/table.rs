//! How the tables show figures: a time with its rate, thousands separators, ratios with their
//! range, and the cache condition's name.

use crate::common::median;

/// `12.34 s, 81,700/s`
pub fn cell(secs: f64, n: u64) -> String {
    let t = if secs < 1.0 {
        format!("{:.0} ms", secs * 1e3)
    } else {
        format!("{secs:.2} s")
    };
    format!("{t}, {}/s", thousands((n as f64 / secs).round() as u64))
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1.95x (1.27-2.52)`: the ratio of the medians, and the lowest and highest within a run.
pub fn ratio(peer: &[f64], labpool: &[f64]) -> String {
    let m = median(peer.to_vec()) / median(labpool.to_vec());
    let per_run: Vec<f64> = peer.iter().zip(labpool).map(|(p, l)| p / l).collect();
    if per_run.len() < 2 {
        return format!("{m:.2}x");
    }
    let lo = per_run.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = per_run.iter().cloned().fold(0.0, f64::max);
    format!("{m:.2}x ({lo:.2}-{hi:.2})")
}

/// `cold` or `warm`.
pub fn cond_name(cold: bool) -> &'static str {
    if cold { "cold" } else { "warm" }
}
