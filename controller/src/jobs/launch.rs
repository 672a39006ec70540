//! The launch order of a job's attempt, built from its row and its allocation. It looks
//! nothing up: the owner's home and shell come from the node's own user database when the
//! job starts there (see `labpool_host::job_environment`), so a slow directory service (LDAP, sssd)
//! never stalls the engine loop, and a node's view of its users is the one that counts.

use crate::api::agent::{ArrayEnv, Launch};
use crate::api::gang::{Gang, GangNode, block_tasks};
use crate::engine::Engine;
use crate::jobs::JobRow;
use labpool_scheduler::Allocation;
use labpool_scheduler::array::parse_array;
use std::path::PathBuf;

impl Engine {
    /// The launch of a job's attempt; `hit` when its datasets were staged before it was placed.
    pub(crate) fn launch(
        &self,
        row: &JobRow,
        alloc: &Allocation,
        stdout: PathBuf,
        stderr: PathBuf,
        hit: bool,
    ) -> (String, Launch) {
        let req = &row.request;
        let array = row.spec.array.as_ref().and_then(|a| {
            let tasks = parse_array(req.array.as_deref()?).ok()?.tasks;
            Some(ArrayEnv {
                array_id: a.array_id.0,
                task: a.task,
                count: tasks.len() as u32,
                min: *tasks.first()?,
                max: *tasks.last()?,
            })
        });
        let launch = Launch {
            job: row.id,
            attempt: row.attempt,
            name: row.spec.name.clone(),
            user: row.spec.user.clone(),
            uid: row.uid,
            gid: row.gid,
            partition: row.spec.partition.clone(),
            account: row.spec.account.clone(),
            script: req.script.clone(),
            args: req.args.clone(),
            workdir: req.workdir.clone(),
            stdout,
            stderr,
            environment: req.environment.clone(),
            gpus: alloc.gpus.clone(),
            cpus: alloc.cpus,
            mem_mib: alloc.mem_mib,
            time_limit_s: crate::api::limit_secs(row.spec.time_limit),
            kill_grace_ms: self.config.controller.kill_grace.as_millis() as u64,
            umask: req.umask,
            array,
            datasets: self.launch_datasets(row.id, hit),
            env: self.launch_env(row),
            models: row.request.model_uses.clone(),
            gpu_env: self.config.jobs.gpu_env(),
            slice_mib: self.slice_mib(alloc),
            shards: match row.spec.resources.slice {
                Some(labpool_scheduler::slice::Slice::Shards(n)) => Some(n),
                _ => None,
            },
            signal: req.signal,
            open_append: req.open_append,
            ntasks: req.ntasks,
            gpus_per_task: req.gpus_per_task,
            get_user_env: req.get_user_env,
            ports: alloc.ports,
            gang: None,
            node_host: self
                .reach
                .remote
                .contains_key(&alloc.node)
                .then(|| self.node_host(&alloc.node)),
        };
        (alloc.node.clone(), launch)
    }

    /// The memory of the slice `alloc` holds, MiB: `None` when it holds its GPUs whole, or
    /// shares a card that is not sliced (or whose memory is unknown), which nothing meters.
    fn slice_mib(&self, alloc: &Allocation) -> Option<u64> {
        let units = alloc.held_units();
        let gpu = alloc.gpus.first()?;
        let node = self.sched.node(&alloc.node)?;
        let device = node.spec.gpus.iter().find(|d| d.index == *gpu)?;
        let mib = labpool_scheduler::slice::memory_mib(device, units);
        (units > 0 && mib > 0).then_some(mib)
    }

    /// The launch orders of a job's attempt, one per node: for a gang, each node is told of
    /// all of them and which one it is; its other nodes run the step launcher, not the
    /// script, and write no output file (the script's output is the first node's).
    pub(crate) fn gang_launches(
        &self,
        node: String,
        launch: Launch,
        alloc: &Allocation,
    ) -> Vec<(String, Launch)> {
        if alloc.others.is_empty() {
            return vec![(node, launch)];
        }
        let nodes: Vec<GangNode> = alloc
            .parts()
            .map(|p| GangNode {
                host: self.node_host(p.node),
                name: p.node.to_string(),
                gpus: p.gpus.to_vec(),
            })
            .collect();
        let secret = crate::link_auth::random_hex(16);
        let tasks_per_node = block_tasks(launch.ntasks, nodes.len() as u32);
        nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut l = launch.clone();
                l.gpus = n.gpus.clone();
                if i > 0 {
                    l.stdout = PathBuf::from("/dev/null");
                    l.stderr = PathBuf::from("/dev/null");
                    l.open_append = true;
                }
                l.gang = Some(Gang {
                    nodes: nodes.clone(),
                    index: i as u32,
                    tasks_per_node: tasks_per_node.clone(),
                    secret: secret.clone(),
                });
                (n.name.clone(), l)
            })
            .collect()
    }

    /// The address other nodes reach `node` at: its agent's host, or, for the controller's
    /// own node, the host of `[controller] listen` (the node's name when that is a wildcard).
    fn node_host(&self, node: &str) -> String {
        let host = |addr: &str| -> String {
            addr.rsplit_once(':')
                .map_or(addr, |(h, _)| h)
                .trim_matches(['[', ']'])
                .to_string()
        };
        if let Some(r) = self.reach.remote.get(node) {
            return host(&r.address);
        }
        match self.config.controller.listen.as_deref().map(host) {
            Some(h) if !h.is_empty() && h != "0.0.0.0" && h != "::" => h,
            _ => node.to_string(),
        }
    }
}
