//! `labpool reservation create|list|delete`.

use crate::api::reservations::{CreateReservation, DeleteReservation, ReservationView};
use crate::args::ReservationCommand;
use crate::client::Client;
use crate::render::{gpu_list, table};
use crate::settings::Config;
use anyhow::Context;
use labpool_scheduler::TimeLimit;
use labpool_scheduler::time::parse_time_limit;

/// Runs `labpool reservation ...`.
pub async fn reservation(command: &ReservationCommand, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    let (views, json): (Vec<ReservationView>, bool) = match command {
        ReservationCommand::Create {
            name,
            start,
            duration,
            gpus,
            node,
            users,
            account,
            json,
        } => {
            let mut problems = Vec::new();
            let start_ms = crate::begin::parse_slurm_time("--start", start, chrono::Local::now())
                .map_err(|e| problems.push(e.to_string()))
                .ok();
            let duration_s = match parse_time_limit(duration) {
                Ok(TimeLimit::Seconds(s)) => Some(s),
                Ok(TimeLimit::Unlimited) => {
                    problems.push(format!("--duration {duration}: a reservation must end"));
                    None
                }
                Err(e) => {
                    problems.push(format!("--duration: {e}"));
                    None
                }
            };
            let (Some(start_ms), Some(duration_s)) = (start_ms, duration_s) else {
                anyhow::bail!("{}", problems.join("\n"));
            };
            let req = CreateReservation {
                name: name.clone(),
                start_ms,
                duration_s,
                gpus: *gpus,
                node: node.clone(),
                users: users.clone(),
                account: account.clone(),
            };
            let all: Vec<ReservationView> = client.post("/v1/reservations", &req).await?;
            if !json {
                let r = all
                    .iter()
                    .find(|r| r.name == *name)
                    .context("the booking is missing from the answer")?;
                crate::out!(
                    "reservation {} booked: GPUs {} on {}, {} to {}",
                    r.name,
                    gpu_list(&r.gpus),
                    r.node,
                    crate::commands::jobs::moment(Some(&r.start)),
                    crate::commands::jobs::moment(Some(&r.end))
                );
                return Ok(());
            }
            (all, true)
        }
        ReservationCommand::List(a) => (client.get("/v1/reservations").await?, a.json),
        ReservationCommand::Delete { name } => {
            let req = DeleteReservation { name: name.clone() };
            let _: Vec<ReservationView> = client.post("/v1/reservations/delete", &req).await?;
            crate::out!("reservation {name} deleted");
            return Ok(());
        }
    };
    if json {
        crate::out!("{}", serde_json::to_string_pretty(&views)?);
    } else if views.is_empty() {
        crate::out!("no reservations");
    } else {
        crate::out!("{}", reservations_table(&views));
    }
    Ok(())
}

/// The reservations as a table, as `reservation list` and `nodes` print them.
pub fn reservations_table(views: &[ReservationView]) -> String {
    let rows = views
        .iter()
        .map(|r| {
            let who: Vec<String> = r
                .users
                .iter()
                .cloned()
                .chain(r.account.iter().map(|a| format!("account {a}")))
                .collect();
            vec![
                r.name.clone(),
                r.state.clone(),
                crate::commands::jobs::moment(Some(&r.start)),
                crate::commands::jobs::moment(Some(&r.end)),
                r.node.clone(),
                gpu_list(&r.gpus),
                who.join(", "),
                if r.jobs.is_empty() {
                    "-".to_string()
                } else {
                    r.jobs
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                },
            ]
        })
        .collect();
    table(
        &[
            "NAME", "STATE", "START", "END", "NODE", "GPUS", "FOR", "JOBS",
        ],
        rows,
    )
}
