//! Where a step's tasks run, and what each task is told: Slurm's rank variables, and the
//! launcher variables torchrun, `torch.distributed` and TensorFlow read (`RANK`, `LOCAL_RANK`,
//! `WORLD_SIZE`, `TF_CONFIG`). Pure: `srun` builds a plan, then runs it.

use crate::api::gang::{Gang, block_tasks, tasks_text};
use std::collections::BTreeMap;

/// The tasks of one step, node by node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepPlan {
    /// For each node the step runs on: its index among the job's nodes, and the global ranks
    /// of its tasks.
    pub nodes: Vec<(usize, Vec<u32>)>,
    /// Tasks in all.
    pub ntasks: u32,
}

/// What `srun` was asked for, and the job's defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct StepAsk {
    /// `-n`.
    pub ntasks: Option<u32>,
    /// `-N`.
    pub nodes: Option<u32>,
    /// `--ntasks-per-node`.
    pub per_node: Option<u32>,
    /// The job's `SLURM_NTASKS`.
    pub job_ntasks: u32,
    /// `-c`: cores each of the step's tasks needs [default 1].
    pub cpus_per_task: Option<u32>,
    /// The job's cores on each of its nodes (`SLURM_CPUS_ON_NODE`); 0: not known, not checked.
    pub job_cpus_per_node: u32,
    /// `--overcommit`: more tasks than cores is allowed.
    pub overcommit: bool,
}

/// Plans a step over a job with `job_nodes` nodes, as Slurm does: `-N` takes the job's first
/// nodes; `-n` alone takes as many nodes as tasks, up to all of them; tasks are spread in
/// blocks, ranks numbered node after node.
pub fn plan(job_nodes: usize, ask: StepAsk) -> Result<StepPlan, String> {
    let job_nodes = job_nodes.max(1) as u32;
    if let Some(n) = ask.nodes
        && (n == 0 || n > job_nodes)
    {
        return Err(format!(
            "-N {n}: the job has {job_nodes} node{}; ask for 1 to {job_nodes}",
            if job_nodes == 1 { "" } else { "s" }
        ));
    }
    let nodes = match (ask.nodes, ask.ntasks, ask.per_node) {
        (Some(n), _, _) => n,
        (None, _, Some(_)) => job_nodes,
        (None, Some(t), None) => t.clamp(1, job_nodes),
        (None, None, None) => job_nodes,
    };
    let counts = match (ask.ntasks, ask.per_node) {
        (Some(t), _) => block_tasks(t.max(1), nodes),
        (None, Some(p)) => vec![p.max(1); nodes as usize],
        (None, None) => block_tasks(ask.job_ntasks.max(nodes), nodes),
    };
    // As Slurm refuses a step that needs more cores than the job holds on a node ("More
    // processors requested than permitted"), unless it may overcommit.
    let cpt = ask.cpus_per_task.unwrap_or(1).max(1);
    if !ask.overcommit
        && ask.job_cpus_per_node > 0
        && let Some(most) = counts.iter().copied().max()
        && most * cpt > ask.job_cpus_per_node
    {
        return Err(format!(
            "More processors requested than permitted: {most} task{} x {cpt} core{} on one node, and the job holds {} core{} there; srun fewer tasks (-n), ask sbatch for more (-n, -c), or add --overcommit",
            if most == 1 { "" } else { "s" },
            if cpt == 1 { "" } else { "s" },
            ask.job_cpus_per_node,
            if ask.job_cpus_per_node == 1 { "" } else { "s" },
        ));
    }
    let mut next = 0;
    let plan_nodes = counts
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let ranks = (next..next + c).collect();
            next += c;
            (i, ranks)
        })
        .collect();
    Ok(StepPlan {
        nodes: plan_nodes,
        ntasks: next,
    })
}

impl StepPlan {
    /// Each task's own variables, by rank. `gang` gives the hosts (`TF_CONFIG`); `ports` is
    /// the job's first leased port, when it has a lease.
    pub fn task_env(
        &self,
        step: u32,
        names: &[String],
        gang: Option<&Gang>,
        ports: Option<u16>,
    ) -> BTreeMap<u32, BTreeMap<String, String>> {
        let counts: Vec<u32> = self.nodes.iter().map(|(_, r)| r.len() as u32).collect();
        let step_names: Vec<String> = self
            .nodes
            .iter()
            .filter_map(|(i, _)| names.get(*i).cloned())
            .collect();
        let nodelist = labpool_scheduler::hostlist::compress(&step_names);
        // One TensorFlow worker per task, on the job's leased ports after the first two.
        let workers: Option<Vec<String>> = ports.map(|first| {
            self.nodes
                .iter()
                .flat_map(|(i, ranks)| {
                    let host = gang
                        .and_then(|g| g.nodes.get(*i))
                        .map_or("127.0.0.1".to_string(), |n| n.host.clone());
                    (0..ranks.len()).map(move |l| format!("{host}:{}", first as u32 + 2 + l as u32))
                })
                .collect()
        });
        let mut out = BTreeMap::new();
        for (pos, (node, ranks)) in self.nodes.iter().enumerate() {
            for (local, rank) in ranks.iter().enumerate() {
                let mut env = BTreeMap::new();
                let mut set = |k: &str, v: String| {
                    env.insert(k.to_string(), v);
                };
                set("SLURM_PROCID", rank.to_string());
                set("SLURM_LOCALID", local.to_string());
                set("SLURM_NODEID", node.to_string());
                set("SLURM_STEP_ID", step.to_string());
                set("SLURM_STEPID", step.to_string());
                set("SLURM_STEP_NUM_TASKS", self.ntasks.to_string());
                set("SLURM_STEP_NUM_NODES", self.nodes.len().to_string());
                set("SLURM_STEP_NODELIST", nodelist.clone());
                set("SLURM_STEP_TASKS_PER_NODE", tasks_text(&counts));
                set("SLURM_NTASKS", self.ntasks.to_string());
                set("SLURM_NPROCS", self.ntasks.to_string());
                set("RANK", rank.to_string());
                set("LOCAL_RANK", local.to_string());
                set("WORLD_SIZE", self.ntasks.to_string());
                set("LOCAL_WORLD_SIZE", counts[pos].to_string());
                set("GROUP_RANK", pos.to_string());
                if let Some(w) = &workers {
                    let tf = serde_json::json!({
                        "cluster": {"worker": w},
                        "task": {"type": "worker", "index": rank},
                    });
                    set("TF_CONFIG", tf.to_string());
                }
                out.insert(*rank, env);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_spread_as_slurm_spreads_them() {
        let ask = |ntasks, nodes, per_node| StepAsk {
            ntasks,
            nodes,
            per_node,
            job_ntasks: 4,
            ..StepAsk::default()
        };
        let p = plan(2, ask(None, None, None)).unwrap();
        assert_eq!(p.nodes, [(0, vec![0, 1]), (1, vec![2, 3])]);
        let p = plan(2, ask(Some(1), None, None)).unwrap();
        assert_eq!(p.nodes, [(0, vec![0])]);
        let p = plan(2, ask(None, None, Some(1))).unwrap();
        assert_eq!(p.nodes, [(0, vec![0]), (1, vec![1])]);
        let p = plan(2, ask(Some(3), Some(2), None)).unwrap();
        assert_eq!(p.nodes, [(0, vec![0, 1]), (1, vec![2])]);
        assert!(
            plan(2, ask(None, Some(3), None))
                .unwrap_err()
                .contains("-N 3")
        );
        let p = plan(1, ask(Some(3), None, None)).unwrap();
        assert_eq!(p.nodes, [(0, vec![0, 1, 2])]);
    }

    /// A step needs a core per task (or `-c`) on each node, as Slurm counts them: `srun -n 2`
    /// in a one-core job is refused, unless it may overcommit.
    #[test]
    fn a_step_that_needs_more_cores_than_the_job_holds_is_refused() {
        let ask = |ntasks, cpus_per_task, overcommit| StepAsk {
            ntasks: Some(ntasks),
            job_ntasks: 1,
            cpus_per_task,
            job_cpus_per_node: 1,
            overcommit,
            ..StepAsk::default()
        };
        let e = plan(1, ask(2, None, false)).unwrap_err();
        assert!(
            e.starts_with("More processors requested than permitted: 2 tasks x 1 core on one node, and the job holds 1 core there"),
            "{e}"
        );
        assert!(plan(1, ask(2, None, true)).is_ok(), "--overcommit");
        assert!(plan(1, ask(1, None, false)).is_ok());
        let four = StepAsk {
            job_cpus_per_node: 4,
            ..ask(2, Some(2), false)
        };
        assert!(plan(1, four).is_ok(), "2 tasks x 2 cores fit 4");
        assert!(
            plan(
                1,
                StepAsk {
                    cpus_per_task: Some(3),
                    ..four
                }
            )
            .is_err()
        );
    }

    #[test]
    fn each_task_gets_its_ranks_and_a_tf_config_naming_every_worker() {
        let p = plan(
            2,
            StepAsk {
                per_node: Some(1),
                job_ntasks: 2,
                ..StepAsk::default()
            },
        )
        .unwrap();
        let gang = Gang {
            nodes: vec![
                crate::api::gang::GangNode {
                    name: "gn1".into(),
                    host: "10.0.0.1".into(),
                    gpus: vec![0],
                },
                crate::api::gang::GangNode {
                    name: "gn2".into(),
                    host: "10.0.0.2".into(),
                    gpus: vec![0],
                },
            ],
            index: 0,
            tasks_per_node: vec![1, 1],
            secret: "s".into(),
        };
        let names = vec!["gn1".to_string(), "gn2".to_string()];
        let env = p.task_env(3, &names, Some(&gang), Some(20000));
        let second = &env[&1];
        assert_eq!(second["RANK"], "1");
        assert_eq!(second["SLURM_NODEID"], "1");
        assert_eq!(second["LOCAL_RANK"], "0");
        assert_eq!(second["WORLD_SIZE"], "2");
        assert_eq!(second["SLURM_STEP_NODELIST"], "gn[1-2]");
        assert_eq!(second["SLURM_STEP_TASKS_PER_NODE"], "1(x2)");
        let tf: serde_json::Value = serde_json::from_str(&second["TF_CONFIG"]).unwrap();
        assert_eq!(
            tf["cluster"]["worker"],
            serde_json::json!(["10.0.0.1:20002", "10.0.0.2:20002"])
        );
        assert_eq!(tf["task"]["index"], 1);
    }
}
