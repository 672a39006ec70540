//! `labpool nodes` and `labpool partition list`.

use crate::api::{NodeView, PartitionView};
use crate::client::Client;
use crate::render::{or_dash, print, table};
use crate::settings::Config;
use labpool_units::format_elapsed;
use labpool_units::format_mib;

/// Runs `labpool nodes`.
pub async fn nodes(as_json: bool, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    let nodes: Vec<NodeView> = client.get("/v1/nodes").await?;
    print(as_json, &nodes, |n| nodes_text(n));
    if !as_json {
        let booked: Vec<crate::api::reservations::ReservationView> =
            client.get("/v1/reservations").await?;
        if !booked.is_empty() {
            crate::out!(
                "\nReservations\n{}",
                super::reservations::reservations_table(&booked)
            );
        }
    }
    Ok(())
}

fn nodes_text(nodes: &[NodeView]) -> String {
    let rows = nodes
        .iter()
        .map(|n| {
            vec![
                n.name.clone(),
                n.state_text(),
                format!("{}/{}", n.gpus_free, n.gpus.len()),
                format!("{}/{}", n.cpus_used, n.cpus),
                format!("{}/{}", format_mib(n.mem_used_mib), format_mib(n.mem_mib)),
                n.gpu_source.clone(),
                or_dash(n.reason.as_ref()),
            ]
        })
        .collect();
    let headers = [
        "NODE",
        "STATE",
        "GPUS(free/all)",
        "CPUS(used/all)",
        "MEMORY(used/all)",
        "GPU-SOURCE",
        "REASON",
    ];
    let mut out = table(&headers, rows);
    for n in nodes {
        out.push_str(&format!("\n{} isolation: {}", n.name, n.isolation));
        if let Some(tool) = &n.checkpoint {
            out.push_str(&format!(
                "\n{} idle sessions: suspended with {tool}",
                n.name
            ));
        }
        if let Some(agent) = &n.agent {
            let load = match (n.load, n.mem_available_mib) {
                (Some(l), Some(m)) => format!(", load {l:.2}, {} available", format_mib(m)),
                _ => String::new(),
            };
            out.push_str(&format!(
                "\n{} agent: {agent}, last heard from {}{load}",
                n.name,
                crate::commands::jobs::moment(n.last_seen.as_deref())
            ));
        }
    }
    let gpu_rows: Vec<Vec<String>> = nodes
        .iter()
        .flat_map(|n| {
            n.gpus.iter().map(move |g| {
                let memory = if g.memory_mib == 0 {
                    "-".to_string()
                } else {
                    format_mib(g.memory_mib)
                };
                let user = g.used_by();
                vec![
                    n.name.clone(),
                    g.index.to_string(),
                    g.gpu_type.clone(),
                    g.product.clone(),
                    memory,
                    user,
                ]
            })
        })
        .collect();
    if !gpu_rows.is_empty() {
        out.push_str("\n\n");
        out.push_str(&table(
            &["NODE", "GPU", "TYPE", "PRODUCT", "MEMORY", "USED BY"],
            gpu_rows,
        ));
    }
    out
}

/// Runs `labpool node drain|resume`.
pub async fn node(command: &crate::args::NodeCommand, config: &Config) -> anyhow::Result<()> {
    use crate::args::NodeCommand;
    let (req, json) = match command {
        NodeCommand::Drain { node, reason, json } => (
            crate::api::DrainRequest {
                node: node.clone(),
                reason: Some(reason.clone()),
            },
            *json,
        ),
        NodeCommand::Resume { node, json } => (
            crate::api::DrainRequest {
                node: node.clone(),
                reason: None,
            },
            *json,
        ),
    };
    let n: NodeView = Client::new(&config.controller.socket)
        .post("/v1/nodes/drain", &req)
        .await?;
    print(json, &n, |n| {
        format!(
            "{} is {}{}",
            n.name,
            n.state_text(),
            n.reason
                .as_ref()
                .map_or_else(String::new, |r| format!(": {r}"))
        )
    });
    Ok(())
}

/// Runs `labpool partition list`.
pub async fn partitions(as_json: bool, config: &Config) -> anyhow::Result<()> {
    let parts: Vec<PartitionView> = Client::new(&config.controller.socket)
        .get("/v1/partitions")
        .await?;
    print(as_json, &parts, |parts| {
        let limit = |s: Option<u64>| s.map_or_else(|| "UNLIMITED".to_string(), format_elapsed);
        let rows = parts
            .iter()
            .map(|p| {
                vec![
                    if p.default {
                        format!("{}*", p.name)
                    } else {
                        p.name.clone()
                    },
                    p.priority.to_string(),
                    limit(p.default_time_s),
                    limit(p.max_time_s),
                    if p.nodes.is_empty() {
                        "all".to_string()
                    } else {
                        p.nodes.join(",")
                    },
                    p.allow_accounts
                        .as_ref()
                        .map_or_else(|| "all".to_string(), |a| a.join(",")),
                    p.max_gpus_per_job
                        .map_or_else(|| "-".to_string(), |n| n.to_string()),
                ]
            })
            .collect();
        table(
            &[
                "PARTITION",
                "PRIORITY",
                "DEFAULT-TIME",
                "MAX-TIME",
                "NODES",
                "ACCOUNTS",
                "MAX-GPUS/JOB",
            ],
            rows,
        )
    });
    Ok(())
}
