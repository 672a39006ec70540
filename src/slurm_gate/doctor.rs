//! What `labpool doctor` checks of the Slurm under the gate: that its commands answer, that
//! accounting keeps labpool's tags (`AccountingStoreFlags=job_comment`), that finished jobs stay
//! in the queue long enough to be seen (`MinJobAge`), that the Prolog is installed, and that
//! every Slurm node has a labpool agent (its cache).

use crate::slurm_gate::command::NodeLine;
use labpool_monitor::doctor::{Finding, Status};
use std::collections::BTreeMap;

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

/// Asks Slurm (as `[executor]` says) and judges what it answers; a Slurm that does not answer
/// is a failure.
pub async fn check(config: &crate::settings::Config, agents: &[String]) -> Vec<Finding> {
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
    agents: &[String],
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
    for n in nodes {
        if !agents.contains(&n.name) {
            out.push(finding(
                Status::Warn,
                &n.name,
                format!(
                    "Slurm node {} has no labpool agent: labpool places no job there",
                    n.name
                ),
                "run `labpool init --join` and `labpool agent` on it, named as Slurm names it",
            ));
        }
    }
    if out.is_empty() {
        out.push(finding(
            Status::Ok,
            "-",
            format!(
                "{} Slurm nodes, each with an agent; accounting keeps comments",
                nodes.len()
            ),
            "",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slurm_without_comments_in_accounting_or_an_agent_is_reported() {
        let text = "AccountingStorageType   = accounting_storage/slurmdbd\nAccountingStoreFlags    = (null)\nMinJobAge               = 300 sec\nProlog                  = /etc/slurm/labpool-prolog.sh\n";
        let nodes = vec![
            NodeLine::parse("NodeName=gn1 State=IDLE").unwrap(),
            NodeLine::parse("NodeName=gn2 State=IDLE").unwrap(),
        ];
        let f = findings(&config_values(text), &nodes, &["gn1".to_string()]);
        let subjects: Vec<&str> = f.iter().map(|f| f.subject.as_str()).collect();
        assert_eq!(subjects, ["AccountingStoreFlags", "gn2"]);
        assert_eq!(f[0].status, Status::Fail);
        let good = text.replace("(null)", "job_comment");
        let f = findings(&config_values(&good), &nodes, &["gn1".into(), "gn2".into()]);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].status, Status::Ok);
    }
}
