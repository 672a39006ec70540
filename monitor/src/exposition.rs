//! Prometheus text exposition (format 0.0.4). A small writer of its own because dcgm-exporter's
//! names (`DCGM_FI_DEV_GPU_UTIL`) must come out exactly as they are, and prometheus-client
//! appends `_total` to every counter. Samples are grouped under their family's HELP and TYPE
//! lines whatever order they are added in, as `promtool check metrics` requires.

use std::collections::BTreeMap;
use std::fmt::Write;

/// A family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Goes up and down.
    Gauge,
    /// Only goes up; its name ends in `_total`.
    Counter,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        }
    }
}

struct Family {
    kind: Kind,
    help: String,
    lines: Vec<String>,
}

/// A page of metrics being written.
#[derive(Default)]
pub struct Exposition {
    order: Vec<String>,
    families: BTreeMap<String, Family>,
}

impl Exposition {
    /// An empty page.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a family; declaring it again changes nothing.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        if !self.families.contains_key(name) {
            self.order.push(name.to_string());
            self.families.insert(
                name.to_string(),
                Family {
                    kind,
                    help: help.to_string(),
                    lines: Vec::new(),
                },
            );
        }
    }

    /// Adds a sample to a declared family. Label names are given by the caller and are valid;
    /// values are escaped. A sample of an undeclared family is a bug: it is declared as an
    /// untyped gauge so the page stays valid.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        if !self.families.contains_key(name) {
            self.family(name, Kind::Gauge, name);
        }
        let mut line = String::with_capacity(64);
        line.push_str(name);
        if !labels.is_empty() {
            line.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                let _ = write!(line, "{k}=\"{}\"", escape(v));
            }
            line.push('}');
        }
        line.push(' ');
        line.push_str(&format_value(value));
        if let Some(f) = self.families.get_mut(name) {
            f.lines.push(line);
        }
    }

    /// The page's text. Families with no samples are left out.
    pub fn finish(self) -> String {
        let mut out = String::new();
        for name in &self.order {
            let f = &self.families[name];
            if f.lines.is_empty() {
                continue;
            }
            let _ = writeln!(out, "# HELP {name} {}", f.help.replace('\n', " "));
            let _ = writeln!(out, "# TYPE {name} {}", f.kind.as_str());
            for l in &f.lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Integers without a fraction, the rest as Rust prints them, and Prometheus's spellings for
/// the special values.
fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_grouped_under_their_family_and_labels_escaped() {
        let mut e = Exposition::new();
        e.family("a", Kind::Gauge, "first");
        e.family("b_total", Kind::Counter, "second");
        e.family("unused", Kind::Gauge, "never sampled");
        e.sample("a", &[("x", "1")], 1.0);
        e.sample("b_total", &[], 2.5);
        e.sample("a", &[("x", "q\"\\\n")], f64::NAN);
        assert_eq!(
            e.finish(),
            "# HELP a first\n# TYPE a gauge\na{x=\"1\"} 1\na{x=\"q\\\"\\\\\\n\"} NaN\n\
             # HELP b_total second\n# TYPE b_total counter\nb_total 2.5\n"
        );
    }
}
