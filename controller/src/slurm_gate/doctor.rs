//! What `labpool doctor` checks of the Slurm under the gate: that its commands answer, that
//! accounting keeps labpool's tags (`AccountingStoreFlags=job_comment`), that finished jobs stay
//! in the queue long enough to be seen (`MinJobAge`), that the Prolog is installed, and that
//! where a node has a labpool agent, the agent and Slurm's `Gres=` agree on its GPUs, and Slurm
//! has shards where the agent cuts cards into slices.

use crate::slurm_gate::node::NodeLine;
use labpool_monitor::doctor::{Finding, Status};
use std::collections::{BTreeMap, BTreeSet};

fn finding(status: Status, subject: &str, what: String, fix: &str) -> Finding {
    Finding {
        check: "slurm".to_string(),
        status,
        subject: subject.to_string(),
        what,
        fix: fix.to_string(),
    }
}

/// `scontrol show config`'s `Key = Value` lines.
pub fn config_values(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The GPUs of each node an agent serves, by type, as the agent reports them.
pub type AgentGpus = BTreeMap<String, Vec<(String, u32)>>;

/// What the agents that registered say of their nodes.
#[derive(Debug, Default, Clone)]
pub struct AgentNodes {
    /// Each node's GPUs.
    pub gpus: AgentGpus,
    /// The nodes whose cards jobs share: cut into slices (`[node] slices`) or `gpu_share`.
    pub sliced: BTreeSet<String>,
}

/// Asks Slurm (as `[executor]` says) and judges what it answers; a Slurm that does not answer
/// is a failure.
pub async fn check(config: &crate::settings::Config, agents: &AgentNodes) -> Vec<Finding> {
    let slurm = crate::slurm_gate::command::Slurm {
        bin: config.executor.slurm_bin.clone(),
        conf: config.executor.slurm_conf.clone(),
    };
    let answered = async {
        Ok::<_, crate::slurm_gate::command::SlurmError>((
            slurm.show_config().await?,
            slurm.nodes().await?,
            slurm.queue().await?,
        ))
    };
    match answered.await {
        Ok((values, nodes, _)) => findings(&values, &nodes, agents),
        Err(e) => vec![finding(
            Status::Fail,
            "slurmctld",
            format!("Slurm does not answer: {e}"),
            "check that slurmctld runs, and slurm_bin and slurm_conf under [executor]",
        )],
    }
}

/// The findings from Slurm's config, its nodes, and the nodes whose agents registered.
pub fn findings(
    config: &BTreeMap<String, String>,
    nodes: &[NodeLine],
    agents: &AgentNodes,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let get = |k: &str| config.get(k).map(String::as_str).unwrap_or("");
    if get("AccountingStorageType").ends_with("/none") || get("AccountingStorageType").is_empty() {
        out.push(finding(
            Status::Warn,
            "AccountingStorageType",
            format!("Slurm keeps no accounting ({}): labpool cannot settle a job that left the queue while the controller was down, and sacct cannot be compared with labpool history", get("AccountingStorageType")),
            "run slurmdbd and set AccountingStorageType=accounting_storage/slurmdbd",
        ));
    } else if !get("AccountingStoreFlags").contains("job_comment") {
        out.push(finding(
            Status::Fail,
            "AccountingStoreFlags",
            format!(
                "AccountingStoreFlags = {}: sacct drops job comments, which hold labpool's tags",
                get("AccountingStoreFlags")
            ),
            "add job_comment to AccountingStoreFlags in slurm.conf, then scontrol reconfigure",
        ));
    }
    let min_age: u64 = get("MinJobAge")
        .split(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    if min_age < 60 {
        out.push(finding(
            Status::Warn,
            "MinJobAge",
            format!("MinJobAge = {min_age} s: a finished job leaves squeue before labpool may have read it"),
            "set MinJobAge=300 (Slurm's default) or more",
        ));
    }
    if !get("Prolog").contains("labpool") {
        out.push(finding(
            Status::Warn,
            "Prolog",
            format!(
                "Prolog = {}: nothing on the nodes refuses a labpool job started without its data",
                get("Prolog")
            ),
            "install deploy/slurm/labpool-prolog.sh on every node and set Prolog= to it",
        ));
    }
    out.extend(disagreements(nodes, &agents.gpus));
    out.extend(slices_without_shards(nodes, &agents.sliced));
    if out.is_empty() {
        let with = nodes
            .iter()
            .filter(|n| agents.gpus.contains_key(&n.name))
            .count();
        out.push(finding(
            Status::Ok,
            "-",
            format!(
                "{} Slurm nodes: {with} with a labpool agent (dataset cache, GPU metrics), {} without (datasets read from the shared storage); accounting keeps comments",
                nodes.len(),
                nodes.len() - with
            ),
            "",
        ));
    }
    out
}

/// Nodes whose agent and Slurm disagree on the GPUs, and agents of nodes Slurm does not have.
fn disagreements(nodes: &[NodeLine], agents: &AgentGpus) -> Vec<Finding> {
    let mut out = Vec::new();
    for n in nodes {
        let Some(agent) = agents.get(&n.name) else {
            continue;
        };
        let slurm = n.gpus();
        let total = |g: &[(String, u32)]| g.iter().map(|(_, c)| c).sum::<u32>();
        let by_type = |g: &[(String, u32)]| {
            let mut g = g.to_vec();
            g.sort();
            g
        };
        // `Gres=gpu:8` names no type: only the count can disagree.
        let untyped = slurm
            .iter()
            .all(|(t, _)| t == crate::slurm_gate::node::UNTYPED_GPU);
        let agree = if untyped {
            total(&slurm) == total(agent)
        } else {
            by_type(&slurm) == by_type(agent)
        };
        if !agree {
            out.push(finding(
                Status::Fail,
                &n.name,
                format!(
                    "node {}: its labpool agent reports {} GPUs ({}) and Slurm's Gres={} says {} ({}): labpool places jobs by the agent's count, Slurm starts them by its own, so some wait in Slurm or GPUs stay idle",
                    n.name,
                    total(agent),
                    describe(agent),
                    n.gres,
                    total(&slurm),
                    describe(&slurm)
                ),
                "make Gres= in slurm.conf and gres.conf name the GPUs the node has (then scontrol reconfigure), or correct the agent's [node] virtual_gpus",
            ));
        }
    }
    for name in agents.keys() {
        if !nodes.iter().any(|n| &n.name == name) {
            out.push(finding(
                Status::Warn,
                name,
                format!("a labpool agent serves node {name}, which Slurm does not have: every job placed there is refused by Slurm"),
                "name the agent as Slurm names its node (labpool init --name), or add the node to slurm.conf",
            ));
        }
    }
    out
}

/// Nodes whose agent shares cards (slices, `gpu_share`) where Slurm has no shards: each sharing
/// job would be asked of Slurm as a whole GPU.
fn slices_without_shards(nodes: &[NodeLine], sliced: &BTreeSet<String>) -> Vec<Finding> {
    nodes
        .iter()
        .filter(|n| sliced.contains(&n.name) && n.shards_per_gpu() == 0)
        .map(|n| {
            finding(
                Status::Warn,
                &n.name,
                format!(
                    "node {}: its labpool agent shares its cards among jobs ([node] slices or gpu_share), but Slurm has no shards there (Gres={}): each such job is asked of Slurm as a whole GPU, which Slurm does not share",
                    n.name, n.gres
                ),
                "add shard to GresTypes, shard:N to the node's Gres= (N = its GPUs times the shards per card, 4 for halves and quarters) and Name=shard Count=N to gres.conf, then scontrol reconfigure",
            )
        })
        .collect()
}

/// `a100: 8, v100: 2`, or `none`.
fn describe(gpus: &[(String, u32)]) -> String {
    if gpus.is_empty() {
        return "none".to_string();
    }
    gpus.iter()
        .map(|(t, c)| format!("{t}: {c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slurm_without_comments_in_accounting_is_reported_and_agentless_nodes_are_fine() {
        let text = "AccountingStorageType   = accounting_storage/slurmdbd\nAccountingStoreFlags    = (null)\nMinJobAge               = 300 sec\nProlog                  = /etc/slurm/labpool-prolog.sh\n";
        let nodes = vec![
            NodeLine::parse("NodeName=gn1 Gres=gpu:a100:8 State=IDLE").unwrap(),
            NodeLine::parse("NodeName=gn2 Gres=gpu:a100:8 State=IDLE").unwrap(),
        ];
        let gn1 = AgentNodes {
            gpus: AgentGpus::from([("gn1".to_string(), vec![("a100".to_string(), 8)])]),
            sliced: BTreeSet::new(),
        };
        let f = findings(&config_values(text), &nodes, &gn1);
        let subjects: Vec<&str> = f.iter().map(|f| f.subject.as_str()).collect();
        assert_eq!(subjects, ["AccountingStoreFlags"]);
        assert_eq!(f[0].status, Status::Fail);
        let good = text.replace("(null)", "job_comment");
        let f = findings(&config_values(&good), &nodes, &gn1);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].status, Status::Ok);
        assert!(
            f[0].what.contains("1 with a labpool agent") && f[0].what.contains("1 without"),
            "{}",
            f[0].what
        );
    }

    #[test]
    fn an_agent_that_disagrees_with_slurms_gres_is_reported() {
        let text = "AccountingStorageType = accounting_storage/slurmdbd\nAccountingStoreFlags = job_comment\nProlog = /etc/slurm/labpool-prolog.sh\n";
        let nodes = vec![
            NodeLine::parse("NodeName=gn1 Gres=gpu:a100:8(S:0-1) State=IDLE").unwrap(),
            NodeLine::parse("NodeName=gn2 Gres=gpu:4 State=IDLE").unwrap(),
            NodeLine::parse("NodeName=gn3 Gres=gpu:a100:8 State=IDLE").unwrap(),
        ];
        let agents = AgentNodes {
            gpus: AgentGpus::from([
                ("gn1".to_string(), vec![("a100".to_string(), 4)]),
                ("gn2".to_string(), vec![("rtx4090".to_string(), 4)]),
                ("gn3".to_string(), vec![("h100".to_string(), 8)]),
                ("gn9".to_string(), vec![]),
            ]),
            sliced: BTreeSet::new(),
        };
        let f = findings(&config_values(text), &nodes, &agents);
        let subjects: Vec<(&str, Status)> =
            f.iter().map(|f| (f.subject.as_str(), f.status)).collect();
        assert_eq!(
            subjects,
            [
                ("gn1", Status::Fail),
                ("gn3", Status::Fail),
                ("gn9", Status::Warn)
            ],
            "an untyped Gres agrees with any type of the same count: {f:#?}"
        );
        assert!(
            f[0].what.contains("reports 4 GPUs (a100: 4)")
                && f[0].what.contains("says 8 (a100: 8)"),
            "{}",
            f[0].what
        );
    }

    #[test]
    fn slices_where_slurm_has_no_shards_are_reported() {
        let text = "AccountingStorageType = accounting_storage/slurmdbd\nAccountingStoreFlags = job_comment\nProlog = /etc/slurm/labpool-prolog.sh\n";
        let nodes = vec![
            NodeLine::parse("NodeName=gn1 Gres=gpu:a100:8,shard:a100:32 State=IDLE").unwrap(),
            NodeLine::parse("NodeName=gn2 Gres=gpu:a100:8 State=IDLE").unwrap(),
            NodeLine::parse("NodeName=gn3 Gres=gpu:a100:8 State=IDLE").unwrap(),
        ];
        let eight = || vec![("a100".to_string(), 8)];
        let agents = AgentNodes {
            gpus: AgentGpus::from([
                ("gn1".to_string(), eight()),
                ("gn2".to_string(), eight()),
                ("gn3".to_string(), eight()),
            ]),
            sliced: BTreeSet::from(["gn1".to_string(), "gn2".to_string()]),
        };
        let f = findings(&config_values(text), &nodes, &agents);
        let subjects: Vec<(&str, Status)> =
            f.iter().map(|f| (f.subject.as_str(), f.status)).collect();
        assert_eq!(subjects, [("gn2", Status::Warn)], "{f:#?}");
        assert!(
            f[0].what.contains("no shards there (Gres=gpu:a100:8)"),
            "{}",
            f[0].what
        );
    }
}
