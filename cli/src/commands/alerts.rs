//! `labpool alerts`: what labpool's own alert engine has firing, pending and lately resolved.

use crate::api::alerts::AlertsView;
use crate::client::Client;
use crate::clock::when;
use crate::render::{print, table};
use crate::settings::Config;
use labpool_monitor::alerts::Alert;

/// Lists the alerts.
pub async fn alerts(as_json: bool, all: bool, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    let mut view: AlertsView = client.get("/v1/alerts").await?;
    if !all {
        view.resolved.clear();
    }
    print(as_json, &view, text);
    Ok(())
}

fn text(v: &AlertsView) -> String {
    if v.firing.is_empty() && v.pending.is_empty() && v.resolved.is_empty() {
        return "no alerts firing".to_string();
    }
    let row = |state: &str, a: &Alert| {
        vec![
            state.to_string(),
            a.severity.as_str().to_string(),
            a.rule.clone(),
            a.subject.clone(),
            when(a.fired_ms.unwrap_or(a.since_ms)),
            a.text.clone(),
        ]
    };
    let rows = v
        .firing
        .iter()
        .map(|a| row("FIRING", a))
        .chain(v.pending.iter().map(|a| row("pending", a)))
        .chain(v.resolved.iter().map(|a| row("resolved", a)))
        .collect();
    table(
        &["STATE", "SEVERITY", "RULE", "SUBJECT", "SINCE", "WHAT"],
        rows,
    )
}
