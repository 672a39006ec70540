//! Inline SVG charts, for the HTML report and the web dashboard: no script, no outside fetch,
//! styled by the page's `.bar` class.

use std::fmt::Write;

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A horizontal bar chart: one bar per (label, value), scaled to the largest, each value
/// written to one decimal with its unit (`12.5 h`).
pub fn bars(title: &str, rows: &[(String, f64)], unit: &str) -> String {
    bars_written(title, rows, |v| format!("{v:.1}{unit}"))
}

/// A horizontal bar chart of counts (jobs by outcome), each written as the whole number it is.
pub fn count_bars(title: &str, rows: &[(String, u64)]) -> String {
    let rows: Vec<(String, f64)> = rows.iter().map(|(k, v)| (k.clone(), *v as f64)).collect();
    bars_written(title, &rows, |v| format!("{v:.0}"))
}

fn bars_written(
    title: &str,
    rows: &[(String, f64)],
    write_value: impl Fn(f64) -> String,
) -> String {
    let max = rows.iter().map(|(_, v)| *v).fold(0.0, f64::max).max(1e-9);
    let (row_h, label_w, bar_w) = (22, 160, 440);
    let h = row_h * rows.len().max(1) + 8;
    let mut s = format!(
        "<figure><figcaption>{}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{h}\" role=\"img\" aria-label=\"{}\">",
        esc(title),
        label_w + bar_w + 90,
        esc(title)
    );
    for (i, (label, v)) in rows.iter().enumerate() {
        let y = i * row_h + 4;
        let w = (v / max * bar_w as f64).round() as usize;
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><rect x=\"{label_w}\" y=\"{y}\" width=\"{w}\" height=\"{}\" class=\"bar\"/><text x=\"{}\" y=\"{}\">{}</text>",
            label_w - 6,
            y + 14,
            esc(label),
            row_h - 6,
            label_w + w + 6,
            y + 14,
            esc(&write_value(*v))
        );
    }
    s.push_str("</svg></figure>");
    s
}

/// A column chart of a series over time (utilisation by day).
pub fn columns(title: &str, rows: &[(String, f64)], max: f64) -> String {
    let (w, h, pad) = (640usize, 160usize, 24usize);
    let n = rows.len().max(1);
    let col = (w - pad) as f64 / n as f64;
    let mut s = format!(
        "<figure><figcaption>{}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" role=\"img\" aria-label=\"{}\">",
        esc(title),
        h + 20,
        esc(title)
    );
    for (i, (label, v)) in rows.iter().enumerate() {
        let bh = (v / max.max(1e-9) * h as f64).round().min(h as f64);
        let x = pad as f64 + i as f64 * col;
        let _ = write!(
            s,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" class=\"bar\"><title>{} {v:.1}</title></rect>",
            h as f64 - bh,
            (col - 1.0).max(1.0),
            esc(label)
        );
    }
    if let (Some((first, _)), Some((last, _))) = (rows.first(), rows.last()) {
        let _ = write!(
            s,
            "<text x=\"{pad}\" y=\"{}\">{}</text><text x=\"{w}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            h + 16,
            esc(first),
            h + 16,
            esc(last)
        );
    }
    s.push_str("</svg></figure>");
    s
}
