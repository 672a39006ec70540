//! `labpool doctor`: the weekly health check. Prints every check, each problem with its fix, and
//! exits 1 when something needs a person (a warning or a failure).

use crate::api::alerts::{DoctorQuery, DoctorReport};
use crate::client::Client;
use crate::render::{print, table};
use crate::settings::Config;
use labpool_monitor::doctor::Status;

/// Runs the checklist on the controller and prints it; Ok(true) when all is well.
pub async fn doctor(
    as_json: bool,
    waiting_hours: Option<f64>,
    running_days: Option<f64>,
    config: &Config,
) -> anyhow::Result<bool> {
    let q = DoctorQuery {
        waiting_hours,
        running_days,
    };
    let report: DoctorReport = Client::new(&config.controller.socket)
        .get_query("/v1/doctor", &q)
        .await?;
    print(as_json, &report, text);
    Ok(report.findings.iter().all(|f| f.status == Status::Ok))
}

fn text(r: &DoctorReport) -> String {
    let rows = r
        .findings
        .iter()
        .map(|f| {
            let mark = match f.status {
                Status::Ok => "ok",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            let what = if f.fix.is_empty() {
                f.what.clone()
            } else {
                format!("{}; fix: {}", f.what, f.fix)
            };
            vec![mark.to_string(), f.check.clone(), f.subject.clone(), what]
        })
        .collect();
    let problems = r.findings.iter().filter(|f| f.status != Status::Ok).count();
    let tail = if problems == 0 {
        "all checks passed".to_string()
    } else {
        format!("{problems} finding(s) need a person")
    };
    format!(
        "{}\n{tail}",
        table(&["", "CHECK", "SUBJECT", "FOUND"], rows)
    )
}
