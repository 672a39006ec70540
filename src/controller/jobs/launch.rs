//! The launch order of a job's attempt, built from its row and its allocation. It looks
//! nothing up: the owner's home and shell come from the node's own user database when the
//! job starts there (see `agent::environment`), so a slow directory service (LDAP, sssd)
//! never stalls the engine loop, and a node's view of its users is the one that counts.

use crate::api::agent::{ArrayEnv, Launch};
use crate::controller::engine::Engine;
use crate::controller::jobs::JobRow;
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
            gpu_env: self.config.jobs.gpu_env(),
            signal: req.signal,
            open_append: req.open_append,
            ntasks: req.ntasks,
            gpus_per_task: req.gpus_per_task,
        };
        (alloc.node.clone(), launch)
    }
}
