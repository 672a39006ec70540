//! A multi-node job (a gang) as its nodes see it, and the wire format of a step's tasks run
//! on another node of the gang.
//!
//! The batch script runs on the gang's first node. Every other node runs a step launcher
//! (`labpool step-host`, started by the shim as the job's user, inside the job's cgroup and
//! with that node's GPUs) listening on the job's second leased port. `srun` on the first node
//! sends each other node its tasks over TCP once each side proved the gang's secret to the
//! other (`labpool_link::link_auth`; the secret itself is never sent), and relays the tasks' output
//! and exit codes back, line by line. The secret is made per attempt by the
//! controller, sent to the nodes over the signed agent channel, and kept in a file only the
//! job's user can read (`user/gang.json`), so no one else can run tasks in the job.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A gang as each of its nodes is told of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gang {
    /// Its nodes in order; the batch script (and rank 0) runs on the first.
    pub nodes: Vec<GangNode>,
    /// The node this copy is for, as an index into `nodes`.
    pub index: u32,
    /// The job's tasks on each node, in node order (`--ntasks` spread as Slurm's block
    /// distribution does).
    pub tasks_per_node: Vec<u32>,
    /// Shown by `srun` to the other nodes' step launchers.
    pub secret: String,
}

/// One node of a gang.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GangNode {
    /// Node name.
    pub name: String,
    /// The address other nodes reach it at (its agent's host): `MASTER_ADDR` for the first.
    pub host: String,
    /// The job's GPUs there.
    pub gpus: Vec<u32>,
}

impl Gang {
    /// The node names, compressed as Slurm writes a node list (`gn[1-2]`).
    pub fn nodelist(&self) -> String {
        let names: Vec<String> = self.nodes.iter().map(|n| n.name.clone()).collect();
        labpool_scheduler::hostlist::compress(&names)
    }

    /// `SLURM_TASKS_PER_NODE` in Slurm's form: `4(x2)`, or `2(x2),1`.
    pub fn tasks_per_node_text(&self) -> String {
        tasks_text(&self.tasks_per_node)
    }
}

/// Counts in Slurm's run-length form: `4(x2),1`.
pub fn tasks_text(counts: &[u32]) -> String {
    let mut runs: Vec<(u32, usize)> = Vec::new();
    for c in counts {
        match runs.last_mut() {
            Some((v, n)) if v == c => *n += 1,
            _ => runs.push((*c, 1)),
        }
    }
    runs.iter()
        .map(|(v, n)| match n {
            1 => v.to_string(),
            n => format!("{v}(x{n})"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `ntasks` tasks over `nodes` nodes, as Slurm's block distribution spreads them: as evenly as
/// possible, the first nodes taking one more.
pub fn block_tasks(ntasks: u32, nodes: u32) -> Vec<u32> {
    let nodes = nodes.max(1);
    (0..nodes)
        .map(|i| ntasks / nodes + u32::from(i < ntasks % nodes))
        .collect()
}

/// What `srun` asks of another node's step launcher: run these tasks of this step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRequest {
    /// The step's id.
    pub step: u32,
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// The working directory `srun` ran in.
    pub cwd: String,
    /// `srun`'s environment; the launcher puts its own node's variables over it.
    pub env: BTreeMap<String, String>,
    /// One entry per task to run there.
    pub tasks: Vec<TaskEnv>,
}

/// One task of a step: its variables (`SLURM_PROCID`, `RANK`, `TF_CONFIG`, …) and GPUs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskEnv {
    /// Global rank.
    pub rank: u32,
    /// Its own variables.
    pub env: BTreeMap<String, String>,
    /// Its GPUs with `--gpus-per-task`, by index on that node; `None` sees all of the job's.
    pub gpus: Option<Vec<String>>,
}

/// One line from a step launcher back to `srun`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StepFrame {
    /// A line a task wrote to its standard output.
    Out {
        /// Its rank.
        rank: u32,
        /// The line, without its newline.
        line: String,
    },
    /// A line a task wrote to its standard error.
    Err {
        /// Its rank.
        rank: u32,
        /// The line.
        line: String,
    },
    /// Every task ended: (rank, exit code, signal).
    Exit {
        /// Each task's end.
        codes: Vec<(u32, i32, Option<i32>)>,
    },
    /// The launcher refused the request, with why.
    Refused {
        /// Why.
        why: String,
    },
}

impl crate::JobView {
    /// Its nodes as Slurm writes a node list (`gn[1-2]`), or `None` before it is placed.
    pub fn nodelist(&self) -> Option<String> {
        let first = self.node.clone()?;
        let mut names = vec![first];
        names.extend(self.others.iter().map(|s| s.node.clone()));
        Some(labpool_scheduler::hostlist::compress(&names))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_distribution_and_its_text_are_slurms() {
        assert_eq!(block_tasks(8, 2), [4, 4]);
        assert_eq!(block_tasks(5, 2), [3, 2]);
        assert_eq!(block_tasks(2, 3), [1, 1, 0]);
        assert_eq!(tasks_text(&[4, 4]), "4(x2)");
        assert_eq!(tasks_text(&[2, 2, 1]), "2(x2),1");
        assert_eq!(tasks_text(&[1]), "1");
    }
}
