//! The environment a job sees: the submit environment (after `--export`), login defaults where
//! it lacks them, and the variables labpool and Slurm scripts expect. `CUDA_VISIBLE_DEVICES` is
//! always set by labpool, whatever the submitter's shell had. The agent starts jobs with it, and
//! the Slurm gate submits it to Slurm.

use labpool_api::agent::Launch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Builds the job's whole environment for `launch` on `node`; `key` marks its processes (the agent finds them by it); `links` is the directory of links to its datasets, if any, and
/// `cached` each dataset's directory in the node cache.
pub fn job_environment(
    launch: &Launch,
    node: &str,
    key: &str,
    links: Option<&Path>,
    cached: &[(String, PathBuf)],
) -> BTreeMap<String, String> {
    let mut env = launch.environment.clone();
    let mut default = |k: &str, v: String| {
        env.entry(k.to_string()).or_insert(v);
    };
    let (home, shell) = login_defaults(launch.uid);
    default("HOME", home.display().to_string());
    default("USER", launch.user.clone());
    default("LOGNAME", launch.user.clone());
    default("SHELL", shell.display().to_string());
    default("PATH", "/usr/local/bin:/usr/bin:/bin".to_string());
    // GPU hygiene (memory growth, async allocator): the job's own setting wins.
    for (k, v) in &launch.gpu_env {
        default(k, v.clone());
    }

    let gpus = launch
        .gpus
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let job = launch.job.to_string();
    let workdir = launch.workdir.display().to_string();
    let set = [
        // Only the allocated GPUs, numbered as NVML numbers them (PCI bus order).
        ("CUDA_VISIBLE_DEVICES", gpus.clone()),
        ("CUDA_DEVICE_ORDER", "PCI_BUS_ID".to_string()),
        ("GPU_DEVICE_ORDINAL", gpus.clone()),
        (crate::env_vars::LABPOOL_JOB_ID, job.clone()),
        (crate::env_vars::LABPOOL_JOB_NAME, launch.name.clone()),
        (crate::env_vars::LABPOOL_ATTEMPT, launch.attempt.to_string()),
        (crate::env_vars::LABPOOL_JOB_KEY, key.to_string()),
        (crate::env_vars::LABPOOL_GPUS, gpus.clone()),
        (crate::env_vars::LABPOOL_NODE, node.to_string()),
        (crate::env_vars::LABPOOL_PARTITION, launch.partition.clone()),
        (crate::env_vars::LABPOOL_CPUS, launch.cpus.to_string()),
        // What scripts written for Slurm read.
        ("SLURM_JOB_ID", job.clone()),
        ("SLURM_JOBID", job),
        ("SLURM_JOB_NAME", launch.name.clone()),
        ("SLURM_JOB_USER", launch.user.clone()),
        ("SLURM_JOB_UID", launch.uid.to_string()),
        ("SLURM_JOB_PARTITION", launch.partition.clone()),
        ("SLURM_JOB_NODELIST", node.to_string()),
        ("SLURM_NODELIST", node.to_string()),
        ("SLURMD_NODENAME", node.to_string()),
        ("SLURM_JOB_NUM_NODES", "1".to_string()),
        ("SLURM_NNODES", "1".to_string()),
        (
            "SLURM_CPUS_PER_TASK",
            (launch.cpus / launch.ntasks.max(1)).max(1).to_string(),
        ),
        ("SLURM_NTASKS", launch.ntasks.to_string()),
        ("SLURM_NPROCS", launch.ntasks.to_string()),
        ("SLURM_TASKS_PER_NODE", launch.ntasks.to_string()),
        ("SLURM_CPUS_ON_NODE", launch.cpus.to_string()),
        ("SLURM_JOB_GPUS", gpus.clone()),
        ("SLURM_GPUS_ON_NODE", launch.gpus.len().to_string()),
        ("SLURM_SUBMIT_DIR", workdir),
        (
            "SLURM_RESTART_COUNT",
            launch.attempt.saturating_sub(1).to_string(),
        ),
    ];
    for (k, v) in set {
        env.insert(k.to_string(), v);
    }
    if launch.open_append {
        // As sbatch --open-mode=append sets it: srun's --output files append too.
        env.insert("SLURM_OPEN_MODE".to_string(), "a".to_string());
    }
    if launch.mem_mib > 0 {
        env.insert("SLURM_MEM_PER_NODE".to_string(), launch.mem_mib.to_string());
    }
    if let Some(n) = launch.shards {
        env.insert("SLURM_SHARDS_ON_NODE".to_string(), n.to_string());
    }
    if let Some(a) = &launch.array {
        for (k, v) in [
            ("SLURM_ARRAY_JOB_ID", a.array_id),
            ("SLURM_ARRAY_TASK_ID", a.task as u64),
            ("SLURM_ARRAY_TASK_COUNT", a.count as u64),
            ("SLURM_ARRAY_TASK_MIN", a.min as u64),
            ("SLURM_ARRAY_TASK_MAX", a.max as u64),
        ] {
            env.insert(k.to_string(), v.to_string());
        }
    }
    if let Some(a) = &launch.account {
        env.insert("SLURM_JOB_ACCOUNT".to_string(), a.clone());
        env.insert(crate::env_vars::LABPOOL_ACCOUNT.to_string(), a.clone());
    }
    if let Some(dir) = links {
        env.insert(
            crate::env_vars::LABPOOL_DATASETS.to_string(),
            dir.display().to_string(),
        );
    }
    for (name, dir) in cached {
        env.insert(
            labpool_cache::registry::env_var(name),
            dir.display().to_string(),
        );
    }
    if let Some(g) = launch.gpus_per_task {
        env.insert("SLURM_GPUS_PER_TASK".to_string(), g.to_string());
    }
    if let Some(t) = launch.time_limit_s {
        env.insert(
            crate::env_vars::LABPOOL_TIME_LIMIT_S.to_string(),
            t.to_string(),
        );
    }
    match &launch.node_host {
        Some(h) => env.insert(crate::env_vars::LABPOOL_NODE_ADDR.to_string(), h.clone()),
        None => env.remove(crate::env_vars::LABPOOL_NODE_ADDR),
    };
    env
}

/// The owner's home directory and login shell from this node's user database, as a login
/// would set them; `/` and `/bin/sh` for a uid the node does not know.
fn login_defaults(uid: u32) -> (PathBuf, PathBuf) {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => (u.dir, u.shell),
        _ => (PathBuf::from("/"), PathBuf::from("/bin/sh")),
    }
}
