//! `sinfo`, as Slurm prints it: partitions with their nodes grouped by state (the default),
//! `-N` one line per node and partition, `-o/--format` with the common `%` fields, `-h`, and
//! the node filters `-d`, `-r`, `-n` and `-t`.

use super::format::{parse_format, render, slurm_limit};
use crate::api::{NodeView, PartitionView};
use crate::client::Client;
use labpool_scheduler::hostlist::compress;
use labpool_scheduler::node::NodeState;

const DEFAULT: &str = "%9P %.5a %.10l %.6D %.6t %N";
const NODES: &str = "%10N %.6D %11P %6t";

/// sinfo's options.
#[derive(clap::Parser, Debug)]
#[command(
    name = "sinfo",
    no_binary_name = true,
    infer_long_args = true,
    disable_help_flag = true
)]
pub struct SinfoArgs {
    /// One line per node
    #[arg(short = 'N', long = "Node")]
    node: bool,
    /// The output format
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    /// Only these partitions
    #[arg(short = 'p', long = "partition")]
    partitions: Option<String>,
    /// No header line
    #[arg(short = 'h', long = "noheader")]
    noheader: bool,
    /// Print help (-h is --noheader, as in Slurm)
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Only nodes that do not answer
    #[arg(short = 'd', long = "dead", conflicts_with = "responding")]
    dead: bool,
    /// Only nodes that answer
    #[arg(short = 'r', long = "responding")]
    responding: bool,
    /// Only these nodes (a host list)
    #[arg(short = 'n', long = "nodes")]
    nodes: Option<String>,
    /// Only nodes in these states (idle,mix,alloc,drain,down…)
    #[arg(short = 't', long = "states")]
    states: Option<String>,
}

/// Whether a node passes sinfo's node filters: `-d`, `-r`, the nodes of `-n` (`listed`) and
/// the states of `-t` (`states`, lower case).
fn node_wanted(
    a: &SinfoArgs,
    listed: Option<&[String]>,
    states: Option<&[String]>,
    n: &NodeView,
) -> bool {
    let (long, short) = state_names(n.state);
    (!a.dead || !n.responding)
        && (!a.responding || n.responding)
        && listed.is_none_or(|l| l.contains(&n.name))
        && states.is_none_or(|s| {
            s.iter().any(|x| {
                x == long
                    || x == short
                    || x == "all"
                    || (x == "no_respond" && !n.responding)
                    || (x == "responding" && n.responding)
            })
        })
}

/// Slurm's long and compact names of a node state.
fn state_names(s: NodeState) -> (&'static str, &'static str) {
    match s {
        NodeState::Idle => ("idle", "idle"),
        NodeState::Mixed => ("mixed", "mix"),
        NodeState::Allocated => ("allocated", "alloc"),
        NodeState::Draining => ("draining", "drng"),
        NodeState::Drained => ("drained", "drain"),
        NodeState::Down => ("down", "down"),
    }
}

fn star(n: &NodeView) -> &'static str {
    if n.responding { "" } else { "*" }
}

/// One line's worth: a partition and a group of its nodes.
struct Group<'a> {
    partition: &'a PartitionView,
    nodes: Vec<&'a NodeView>,
}

/// Runs sinfo against the controller; returns what it prints.
pub async fn sinfo(client: &Client, a: &SinfoArgs) -> anyhow::Result<String> {
    let partitions: Vec<PartitionView> = client.get("/v1/partitions").await?;
    let nodes: Vec<NodeView> = client.get("/v1/nodes").await?;
    let wanted: Option<Vec<&str>> = a.partitions.as_deref().map(|p| p.split(',').collect());
    let listed = match &a.nodes {
        Some(list) => Some(
            labpool_scheduler::hostlist::expand(list)
                .map_err(|e| anyhow::anyhow!("--nodes {list}: {e}"))?,
        ),
        None => None,
    };
    let states: Option<Vec<String>> = a.states.as_deref().map(|s| {
        s.split(',')
            .map(|x| x.trim().to_ascii_lowercase())
            .collect()
    });
    let nodes: Vec<NodeView> = nodes
        .into_iter()
        .filter(|n| node_wanted(a, listed.as_deref(), states.as_deref(), n))
        .collect();
    let mut groups = Vec::new();
    for p in &partitions {
        if wanted
            .as_ref()
            .is_some_and(|w| !w.contains(&p.name.as_str()))
        {
            continue;
        }
        let members: Vec<&NodeView> = nodes
            .iter()
            .filter(|n| p.nodes.is_empty() || p.nodes.contains(&n.name))
            .collect();
        if a.node {
            groups.extend(members.into_iter().map(|n| Group {
                partition: p,
                nodes: vec![n],
            }));
            continue;
        }
        // One line per state (a node not responding apart), in the order states first appear.
        let mut by_state: Vec<((NodeState, bool), Vec<&NodeView>)> = Vec::new();
        for n in members {
            let state = (n.state, n.responding);
            match by_state.iter_mut().find(|(s, _)| *s == state) {
                Some((_, v)) => v.push(n),
                None => by_state.push((state, vec![n])),
            }
        }
        groups.extend(by_state.into_iter().map(|(_, nodes)| Group {
            partition: p,
            nodes,
        }));
    }
    if a.node {
        groups.sort_by(|x, y| x.nodes[0].name.cmp(&y.nodes[0].name));
    }
    let format = a
        .format
        .as_deref()
        .unwrap_or(if a.node { NODES } else { DEFAULT });
    let pieces = parse_format(format);
    let mut out = Vec::new();
    if !a.noheader {
        out.push(render(&pieces, header));
    }
    for g in &groups {
        out.push(render(&pieces, |c| field(g, c)));
    }
    Ok(out.join("\n"))
}

fn header(c: char) -> String {
    match c {
        'P' | 'R' => "PARTITION",
        'a' => "AVAIL",
        'l' => "TIMELIMIT",
        'D' => "NODES",
        't' | 'T' => "STATE",
        'N' => "NODELIST",
        'G' => "GRES",
        'C' => "CPUS(A/I/O/T)",
        'c' => "CPUS",
        'm' => "MEMORY",
        'f' => "AVAIL_FEATURES",
        'E' => "REASON",
        _ => "",
    }
    .to_string()
}

fn field(g: &Group<'_>, c: char) -> String {
    let first = g.nodes[0];
    let names: Vec<String> = g.nodes.iter().map(|n| n.name.clone()).collect();
    match c {
        'P' => format!(
            "{}{}",
            g.partition.name,
            if g.partition.default { "*" } else { "" }
        ),
        'R' => g.partition.name.clone(),
        'a' => "up".into(),
        'l' => slurm_limit(g.partition.max_time_s),
        'D' => g.nodes.len().to_string(),
        // Slurm's `*`: the node is not responding.
        't' => format!("{}{}", state_names(first.state).1, star(first)),
        'T' => format!("{}{}", state_names(first.state).0, star(first)),
        'N' => compress(&names),
        'G' => {
            let mut types: Vec<(String, usize)> = Vec::new();
            for gpu in &first.gpus {
                match types.iter_mut().find(|(t, _)| *t == gpu.gpu_type) {
                    Some((_, n)) => *n += 1,
                    None => types.push((gpu.gpu_type.clone(), 1)),
                }
            }
            if types.is_empty() {
                "(null)".into()
            } else {
                let list: Vec<String> = types.iter().map(|(t, n)| format!("gpu:{t}:{n}")).collect();
                list.join(",")
            }
        }
        'C' => {
            let (used, total): (u32, u32) = g
                .nodes
                .iter()
                .fold((0, 0), |(u, t), n| (u + n.cpus_used, t + n.cpus));
            format!("{used}/{}/0/{total}", total - used)
        }
        'c' => first.cpus.to_string(),
        'm' => first.mem_mib.to_string(),
        'f' => {
            if first.features.is_empty() {
                "(null)".into()
            } else {
                first.features.join(",")
            }
        }
        'E' => first.reason.clone().unwrap_or_else(|| "none".into()),
        _ => String::new(),
    }
}
