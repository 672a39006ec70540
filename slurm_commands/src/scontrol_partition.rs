//! `scontrol show partition`, as Slurm 22.05 prints a partition (snakemake's slurm executor
//! reads its limits from it).

use super::format::slurm_limit;
use super::scontrol::layout;
use crate::api::{NodeView, PartitionView};
use labpool_scheduler::hostlist::compress;

/// One partition's record.
pub fn show_partition(p: &PartitionView, nodes: &[NodeView], one_line: bool) -> String {
    // A partition that names no nodes has all of them.
    let members: Vec<&NodeView> = nodes
        .iter()
        .filter(|n| p.nodes.is_empty() || p.nodes.contains(&n.name))
        .collect();
    let cpus: u32 = members.iter().map(|n| n.cpus).sum();
    let yes_no = |b: bool| if b { "YES" } else { "NO" }.to_string();
    let accounts = p
        .allow_accounts
        .as_ref()
        .map_or_else(|| "ALL".to_string(), |a| a.join(","));
    let names: Vec<String> = members.iter().map(|n| n.name.clone()).collect();
    let node_list = if names.is_empty() {
        "(null)".to_string()
    } else {
        compress(&names)
    };
    layout(
        vec![
            vec![("PartitionName", p.name.clone())],
            vec![
                ("AllowGroups", "ALL".into()),
                ("AllowAccounts", accounts),
                ("AllowQos", "ALL".into()),
            ],
            vec![
                ("AllocNodes", "ALL".into()),
                ("Default", yes_no(p.default)),
                ("QoS", "N/A".into()),
            ],
            vec![
                (
                    "DefaultTime",
                    p.default_time_s
                        .map_or_else(|| "NONE".to_string(), |t| slurm_limit(Some(t))),
                ),
                ("DisableRootJobs", "NO".into()),
                ("ExclusiveUser", "NO".into()),
                ("GraceTime", "0".into()),
                ("Hidden", "NO".into()),
            ],
            vec![
                ("MaxNodes", "UNLIMITED".into()),
                ("MaxTime", slurm_limit(p.max_time_s)),
                ("MinNodes", "0".into()),
                ("LLN", "NO".into()),
                ("MaxCPUsPerNode", "UNLIMITED".into()),
            ],
            vec![("Nodes", node_list)],
            vec![
                ("PriorityJobFactor", "1".into()),
                ("PriorityTier", p.priority.max(1).to_string()),
                ("RootOnly", "NO".into()),
                ("ReqResv", "NO".into()),
                ("OverSubscribe", "NO".into()),
            ],
            vec![
                ("OverTimeLimit", "NONE".into()),
                ("PreemptMode", "OFF".into()),
            ],
            vec![
                ("State", "UP".into()),
                ("TotalCPUs", cpus.to_string()),
                ("TotalNodes", members.len().to_string()),
                ("SelectTypeParameters", "NONE".into()),
            ],
            vec![("JobDefaults", "(null)".into())],
            vec![
                ("DefMemPerNode", "UNLIMITED".into()),
                ("MaxMemPerNode", "UNLIMITED".into()),
            ],
        ],
        one_line,
    )
}
