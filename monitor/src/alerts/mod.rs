//! labpool's own alert engine, for pools with no Prometheus: each rule fires when its value has
//! stayed at or above `fire_at` for `for_ms`, and resolves only when the value falls below
//! `clear_at` (hysteresis, so a card hovering at 85 °C does not flap). Observations come in with
//! `now`; what fired and what resolved come out, for the controller to deliver.
//!
//! A subject that is no longer observed (its node left, its job ended) resolves.

pub mod rules;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One alert rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Its name: `gpu_temperature`, `node_lost`, ….
    pub name: String,
    /// The value at which it starts to fire.
    pub fire_at: f64,
    /// The value below which a firing alert resolves (at most `fire_at`).
    pub clear_at: f64,
    /// How long the value must hold before it fires, ms.
    pub for_ms: i64,
    /// `critical` or `warning`.
    pub severity: Severity,
}

/// How bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Someone should look this week.
    Warning,
    /// Someone should look now.
    Critical,
}

impl Severity {
    /// Its word.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// One measured value of one rule's subject (`node1/gpu3`, `/srv/scratch`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The rule it is for.
    pub rule: String,
    /// What it is about.
    pub subject: String,
    /// The value.
    pub value: f64,
    /// A sentence for people: what is wrong and what to do.
    pub text: String,
    /// The member it concerns, if any (zombies, quotas).
    pub user: Option<String>,
}

/// An alert, pending or firing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// The rule.
    pub rule: String,
    /// The subject.
    pub subject: String,
    /// How bad.
    pub severity: Severity,
    /// Since when the condition has held, ms.
    pub since_ms: i64,
    /// When it fired, ms (None while pending).
    pub fired_ms: Option<i64>,
    /// The last value.
    pub value: f64,
    /// The last text.
    pub text: String,
    /// The member it concerns.
    pub user: Option<String>,
}

/// What one evaluation changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Change {
    /// It began to fire.
    Fired(Alert),
    /// It stopped; the alert as it was when it resolved.
    Resolved(Alert),
}

/// The engine: the rules and the alerts they hold.
#[derive(Debug, Clone, Default)]
pub struct Engine {
    rules: BTreeMap<String, Rule>,
    alerts: BTreeMap<(String, String), Alert>,
}

impl Engine {
    /// An engine with these rules.
    pub fn new(rules: impl IntoIterator<Item = Rule>) -> Self {
        Engine {
            rules: rules.into_iter().map(|r| (r.name.clone(), r)).collect(),
            alerts: BTreeMap::new(),
        }
    }

    /// Evaluates every rule against `observations` taken at `now_ms`. Observations of rules the
    /// engine does not have are ignored; a rule's subjects not observed resolve.
    pub fn observe(&mut self, now_ms: i64, observations: &[Observation]) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for o in observations {
            let Some(rule) = self.rules.get(&o.rule) else {
                continue;
            };
            let key = (o.rule.clone(), o.subject.clone());
            seen.insert(key.clone());
            let firing = self.alerts.get(&key).is_some_and(|a| a.fired_ms.is_some());
            let bad = if firing {
                o.value >= rule.clear_at
            } else {
                o.value >= rule.fire_at
            };
            if !bad {
                if let Some(a) = self.alerts.remove(&key)
                    && a.fired_ms.is_some()
                {
                    changes.push(Change::Resolved(Alert {
                        value: o.value,
                        text: o.text.clone(),
                        ..a
                    }));
                }
                continue;
            }
            let alert = self.alerts.entry(key).or_insert_with(|| Alert {
                rule: rule.name.clone(),
                subject: o.subject.clone(),
                severity: rule.severity,
                since_ms: now_ms,
                fired_ms: None,
                value: o.value,
                text: o.text.clone(),
                user: o.user.clone(),
            });
            alert.value = o.value;
            alert.text = o.text.clone();
            alert.user = o.user.clone();
            if alert.fired_ms.is_none() && now_ms - alert.since_ms >= rule.for_ms {
                alert.fired_ms = Some(now_ms);
                changes.push(Change::Fired(alert.clone()));
            }
        }
        let gone: Vec<(String, String)> = self
            .alerts
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            if let Some(a) = self.alerts.remove(&key)
                && a.fired_ms.is_some()
            {
                changes.push(Change::Resolved(Alert {
                    text: format!("{} is no longer measured", a.subject),
                    ..a
                }));
            }
        }
        changes
    }

    /// The alerts now firing, by rule and subject.
    pub fn firing(&self) -> Vec<Alert> {
        self.alerts
            .values()
            .filter(|a| a.fired_ms.is_some())
            .cloned()
            .collect()
    }

    /// The alerts whose condition holds but whose "for" has not passed yet.
    pub fn pending(&self) -> Vec<Alert> {
        self.alerts
            .values()
            .filter(|a| a.fired_ms.is_none())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(v: f64) -> Observation {
        Observation {
            rule: "gpu_temperature".into(),
            subject: "n1/gpu0".into(),
            value: v,
            text: format!("{v} C"),
            user: None,
        }
    }

    fn engine() -> Engine {
        Engine::new([Rule {
            name: "gpu_temperature".into(),
            fire_at: 85.0,
            clear_at: 80.0,
            for_ms: 60_000,
            severity: Severity::Critical,
        }])
    }

    #[test]
    fn fires_after_its_for_time_and_resolves_below_the_clear_mark() {
        let mut e = engine();
        assert!(e.observe(0, &[temp(90.0)]).is_empty());
        assert_eq!(e.pending().len(), 1);
        assert!(e.observe(59_999, &[temp(88.0)]).is_empty());
        let fired = e.observe(60_000, &[temp(87.0)]);
        assert!(matches!(&fired[..], [Change::Fired(a)] if a.since_ms == 0 && a.value == 87.0));
        // Between the marks it keeps firing: no flapping.
        assert!(e.observe(70_000, &[temp(82.0)]).is_empty());
        assert_eq!(e.firing().len(), 1);
        let resolved = e.observe(80_000, &[temp(79.0)]);
        assert!(matches!(&resolved[..], [Change::Resolved(a)] if a.value == 79.0));
        assert!(e.firing().is_empty());
    }

    #[test]
    fn a_dip_restarts_the_for_time_and_a_vanished_subject_resolves() {
        let mut e = engine();
        e.observe(0, &[temp(90.0)]);
        e.observe(30_000, &[temp(84.0)]);
        assert!(e.observe(60_000, &[temp(90.0)]).is_empty());
        assert_eq!(e.observe(120_000, &[temp(90.0)]).len(), 1);
        let gone = e.observe(130_000, &[]);
        assert!(matches!(&gone[..], [Change::Resolved(a)] if a.text.contains("no longer")));
    }
}
