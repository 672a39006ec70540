//! A plain submit built in code (the demo, the benchmarks): a command, its GPUs, and every
//! other field as `labpool submit` leaves it when no option is given.

use super::SubmitRequest;
use std::path::Path;

impl SubmitRequest {
    /// Runs `command` under `/bin/sh` in `workdir` with `gpus` GPUs; override the rest with
    /// struct update syntax (`SubmitRequest { time_limit, ..SubmitRequest::command(…) }`).
    pub fn command(name: &str, command: &str, workdir: &Path, gpus: u32) -> SubmitRequest {
        SubmitRequest {
            name: name.to_string(),
            script: format!("#!/bin/sh\n{command}\n"),
            args: Vec::new(),
            workdir: workdir.to_path_buf(),
            output: None,
            error: None,
            gpus,
            gpu_type: None,
            cpus: 1,
            mem_mib: 0,
            time_limit: None,
            partition: None,
            environment: Default::default(),
            umask: 0o022,
            account: None,
            emergency: false,
            preemptible: false,
            interactive: false,
            reservation: None,
            datasets: Vec::new(),
            dependency: None,
            array: None,
            env: None,
            env_id: None,
            env_kind: None,
            models: Vec::new(),
            model_uses: Vec::new(),
            gpu_share: false,
            slice: None,
            no_requeue: false,
            signal: None,
            open_append: false,
            get_user_env: None,
            hold: false,
            mail_types: Default::default(),
            mail_user: None,
            begin_ms: None,
            deadline_ms: None,
            ntasks: 1,
            node_count: 1,
            gpus_per_task: None,
            comment: None,
            nodes: Default::default(),
            idempotency_key: None,
            wrapped: false,
        }
    }
}
