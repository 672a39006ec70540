//! Resolving the layered options into a [`JobRequest`]: every option checked, every problem
//! found reported together, and Slurm's resource arithmetic applied (per task, per GPU, per CPU).

use crate::array::parse_array;
use crate::constraint::Constraint;
use crate::dependency::parse_dependencies;
use crate::export::parse_export;
use crate::gpu::{GpuRequest, parse_gpus, parse_gres};
use crate::hostlist::expand;
use crate::job::NodeRequest;
use crate::options::parse_node_count;
use crate::options::slurm::parse_signal;
use crate::options::{JobOptions, JobRequest, OptionError, check_name};
use crate::time::parse_time_limit;
use labpool_units::parse_mem_mib;

impl JobOptions {
    /// Checks and types every option; the first problem, if any (see [`JobOptions::resolve_all`]).
    pub fn resolve(&self) -> Result<JobRequest, OptionError> {
        self.resolve_all().map_err(|mut all| all.remove(0))
    }

    /// Checks and types every option, and reports every problem at once.
    pub fn resolve_all(&self) -> Result<JobRequest, Vec<OptionError>> {
        let mut errors: Vec<OptionError> = Vec::new();
        let mut warnings = Vec::new();
        let s = &self.slurm;
        let mut take = |r: Result<(), OptionError>| {
            if let Err(e) = r {
                errors.push(e);
            }
        };
        // Nodes and tasks first: the per-node, per-task and per-GPU options count on them.
        let nodes_given = match self.nodes.as_deref().map(parse_node_count).transpose() {
            Ok(n) => n,
            Err(e) => {
                take(Err(e));
                None
            }
        };
        let per_node = self.ntasks_per_node.filter(|m| *m > 0);
        let ntasks_given = self.ntasks;
        let mut ntasks = match (ntasks_given, per_node, nodes_given) {
            (Some(n), _, _) => n,
            (None, Some(m), n) => m.saturating_mul(n.unwrap_or(1)),
            // -N 2 alone: one task per node, as sbatch counts them.
            (None, None, Some(n)) => n,
            (None, None, None) => 1,
        };
        let node_count = match (nodes_given, per_node) {
            (Some(n), Some(m)) => n.max(ntasks.div_ceil(m)),
            (Some(n), None) => n,
            (None, Some(m)) => ntasks.div_ceil(m).max(1),
            (None, None) => 1,
        }
        .max(1);
        // The GPUs: per node (--gres, --gpus-per-node), or for the whole job (--gpus,
        // --gpus-per-task), spread evenly over the nodes.
        let spellings = [
            self.gres.is_some(),
            self.gpus.is_some(),
            self.gpus_per_node.is_some(),
            s.gpus_per_task.is_some(),
        ];
        let (gpus, gpus_total) = if spellings.iter().filter(|x| **x).count() > 1 {
            take(Err(if self.gres.is_some() && self.gpus.is_some() {
                OptionError::GresAndGpus
            } else {
                OptionError::Conflict(
                    "--gres, --gpus, --gpus-per-node and --gpus-per-task each ask for GPUs; keep one of them"
                        .into(),
                )
            }));
            (GpuRequest::default(), 0)
        } else {
            let mut parsed = |r: Result<GpuRequest, _>| {
                r.unwrap_or_else(|e: crate::gpu::GpuParseError| {
                    take(Err(e.into()));
                    GpuRequest::default()
                })
            };
            let per_node = |g: GpuRequest| {
                let total = g.count.saturating_mul(node_count);
                (g, total)
            };
            let per_job = |g: GpuRequest, total: u32| {
                let count = total.div_ceil(node_count);
                (GpuRequest { count, ..g }, total)
            };
            if let Some(g) = &self.gres {
                per_node(parsed(parse_gres(g)))
            } else if let Some(g) = &self.gpus_per_node {
                per_node(parsed(parse_gpus(g)))
            } else if let Some(g) = &self.gpus {
                let g = parsed(parse_gpus(g));
                let total = g.count;
                per_job(g, total)
            } else if let Some(g) = &s.gpus_per_task {
                let g = parsed(parse_gpus(g));
                let total = g.count.saturating_mul(ntasks);
                per_job(g, total)
            } else {
                (GpuRequest::default(), 0)
            }
        };
        // Cores follow the tasks asked for; sbatch 22.05 does not multiply --cpus-per-task by
        // the tasks --ntasks-per-gpu adds (4 GPUs, 1 task each, -c 16: 16 cores, not 64).
        let cpu_tasks = ntasks;
        if let Some(per_gpu) = s.ntasks_per_gpu {
            match (ntasks_given, gpus_total) {
                (Some(_), _) => take(Err(OptionError::Conflict(
                    "--ntasks and --ntasks-per-gpu both set the tasks; keep one of them".into(),
                ))),
                (None, 0) => take(Err(OptionError::NeedsGpus("--ntasks-per-gpu"))),
                (None, g) => ntasks = per_gpu.saturating_mul(g),
            }
        }
        if self.gpu_share && gpus.count == 0 {
            take(Err(OptionError::GpuShareWithoutGpus));
        }
        if let Some(slice) = gpus.slice {
            if self.gpu_share {
                take(Err(OptionError::Conflict(format!(
                    "--gpu-share and a slice ({slice}) both share a card; a slice is already shared, so leave out --gpu-share"
                ))));
            }
            if node_count > 1 {
                take(Err(OptionError::Conflict(format!(
                    "a slice ({slice}) is part of one card on one node, but --nodes asks for {node_count}; ask for whole GPUs for a multi-node job"
                ))));
            }
        }
        let cpus_total = match (self.cpus_per_task, s.cpus_per_gpu) {
            (Some(_), Some(_)) => {
                take(Err(OptionError::Conflict(
                    "--cpus-per-task and --cpus-per-gpu both set the cores; keep one of them"
                        .into(),
                )));
                1
            }
            (_, Some(_)) if gpus_total == 0 => {
                take(Err(OptionError::NeedsGpus("--cpus-per-gpu")));
                1
            }
            (_, Some(per_gpu)) => per_gpu.saturating_mul(gpus_total),
            (per_task, None) => per_task.unwrap_or(1).saturating_mul(cpu_tasks),
        };
        if cpus_total == 0 || ntasks == 0 {
            take(Err(OptionError::ZeroCpus));
        }
        // What each node holds.
        let cpus = cpus_total.div_ceil(node_count);
        let mem = |text: &str, errors: &mut Vec<OptionError>| match parse_mem_mib(text) {
            Ok(m) => m,
            Err(e) => {
                errors.push(e.into());
                0
            }
        };
        let mem_mib = match (&self.mem, &s.mem_per_cpu, &s.mem_per_gpu) {
            (None, None, None) => 0,
            (Some(m), None, None) => mem(m, &mut errors),
            (None, Some(m), None) => mem(m, &mut errors).saturating_mul(u64::from(cpus)),
            (None, None, Some(_)) if gpus.count == 0 => {
                errors.push(OptionError::NeedsGpus("--mem-per-gpu"));
                0
            }
            (None, None, Some(m)) => mem(m, &mut errors).saturating_mul(u64::from(gpus.count)),
            _ => {
                errors.push(OptionError::Conflict(
                    "--mem, --mem-per-cpu and --mem-per-gpu each set the memory; keep one of them"
                        .into(),
                ));
                0
            }
        };
        let mut take = |r: Result<(), OptionError>| {
            if let Err(e) = r {
                errors.push(e);
            }
        };
        let mail_types = match self
            .mail_type
            .as_deref()
            .map(crate::options::parse_mail_types)
        {
            Some(Ok(t)) => t,
            Some(Err(e)) => {
                take(Err(OptionError::MailType(e)));
                Default::default()
            }
            None => Default::default(),
        };
        if self.qos.is_some() {
            warnings.push("--qos ignored: labpool's limits come from accounts and users (`labpool account list`)".to_string());
        }
        if let Some(d) = &self.dependency {
            take(parse_dependencies(d).map(drop).map_err(Into::into));
        }
        if let Some(a) = &self.array {
            take(parse_array(a).map(drop).map_err(Into::into));
        }
        if self.exclusive.is_some() {
            warnings.push(
                "--exclusive ignored: the job holds only the GPUs, cores and memory it asks for"
                    .to_string(),
            );
        }
        if let Some(name) = &self.job_name {
            take(check_name(name));
        }
        warnings.extend(s.warnings());
        for refusal in s.refusals() {
            take(Err(OptionError::Unsupported(refusal)));
        }
        let signal = match s.signal.as_deref().map(parse_signal).transpose() {
            Ok(sig) => sig,
            Err(e) => {
                take(Err(OptionError::Unsupported(e)));
                None
            }
        };
        let get_user_env = match s.get_user_env.as_deref().map(parse_get_user_env) {
            None => None,
            Some(Ok(t)) => Some(t),
            Some(Err(e)) => {
                take(Err(OptionError::Unsupported(e)));
                None
            }
        };
        let open_append = match s.open_mode.as_deref().map(str::trim) {
            None | Some("truncate") => false,
            Some("append") => true,
            Some(other) => {
                take(Err(OptionError::Unsupported(format!(
                    "--open-mode {other:?}: write append or truncate"
                ))));
                false
            }
        };
        let mut hosts = |flag: &'static str, text: &Option<String>| match text.as_deref() {
            None => Vec::new(),
            Some(t) if t.contains('/') => {
                errors.push(OptionError::Unsupported(format!(
                    "{flag} {t}: a file of node names is not read; list the nodes, e.g. {flag}=gn[1-2]"
                )));
                Vec::new()
            }
            Some(t) => expand(t).unwrap_or_else(|error| {
                errors.push(OptionError::Hostlist { flag, error });
                Vec::new()
            }),
        };
        let nodelist = hosts("--nodelist", &s.nodelist);
        let exclude = hosts("--exclude", &s.exclude);
        let constraint = match s.constraint.as_deref().map(Constraint::parse).transpose() {
            Ok(c) => c,
            Err(e) => {
                errors.push(e.into());
                None
            }
        };
        let mut take = |r: Result<(), OptionError>| {
            if let Err(e) = r {
                errors.push(e);
            }
        };
        let time_limit = match self.time.as_deref().map(parse_time_limit).transpose() {
            Ok(t) => t,
            Err(e) => {
                take(Err(e.into()));
                None
            }
        };
        let export = match self.export.as_deref().map(parse_export).transpose() {
            Ok(e) => e.unwrap_or_default(),
            Err(e) => {
                take(Err(e.into()));
                Default::default()
            }
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(JobRequest {
            name: self.job_name.clone(),
            gpus,
            cpus,
            ntasks,
            node_count,
            gpus_per_task: s
                .gpus_per_task
                .as_deref()
                .and_then(|g| parse_gpus(g).ok())
                .map(|g| g.count),
            mem_mib,
            time_limit,
            output: self.output.clone(),
            error: self.error.clone(),
            partition: self.partition.clone(),
            chdir: self.chdir.clone(),
            export,
            account: self.account.clone(),
            dependency: self.dependency.clone(),
            array: self.array.clone(),
            datasets: self.datasets.clone(),
            models: self.models.clone(),
            emergency: self.emergency,
            preemptible: self.preemptible,
            reservation: s.reservation.clone(),
            gpu_share: self.gpu_share,
            no_requeue: self.no_requeue && !self.requeue,
            env: self.env.clone(),
            signal,
            open_append,
            get_user_env,
            hold: s.hold,
            mail_types,
            mail_user: self.mail_user.clone(),
            comment: s.comment.clone(),
            begin: s.begin.clone(),
            nodes: NodeRequest {
                constraint,
                nodelist,
                exclude,
            },
            warnings,
        })
    }
}

/// `--get-user-env[=TIMEOUT][S|L]`: the seconds the login shell is given (Slurm's default 8).
/// The mode letter (`S`: `su -`, `L`: a login shell) reads the same here: a login shell.
pub fn parse_get_user_env(text: &str) -> Result<u32, String> {
    let t = text.trim().trim_end_matches(['S', 'L', 's', 'l']);
    if t.is_empty() {
        return Ok(8);
    }
    t.parse::<u32>()
        .ok()
        .filter(|n| (1..=600).contains(n))
        .ok_or_else(|| {
            format!("--get-user-env={text}: write a timeout in seconds (1 to 600), optionally followed by S or L, e.g. --get-user-env=10L")
        })
}
