//! Resolving the layered options into a [`JobRequest`]: every option checked, Slurm's
//! resource arithmetic applied.

use crate::array::parse_array;
use crate::dependency::parse_dependencies;
use crate::export::parse_export;
use crate::gpu::{GpuRequest, parse_gpus, parse_gres};
use crate::options::{JobOptions, JobRequest, OptionError, check_name};
use crate::time::parse_time_limit;
use labpool_units::parse_mem_mib;

impl JobOptions {
    /// Checks and types every option.
    pub fn resolve(&self) -> Result<JobRequest, OptionError> {
        let mut warnings = Vec::new();
        let gpus = match (&self.gres, &self.gpus) {
            (Some(_), Some(_)) => return Err(OptionError::GresAndGpus),
            (Some(g), None) => parse_gres(g)?,
            (None, Some(g)) => parse_gpus(g)?,
            (None, None) => GpuRequest::default(),
        };
        if self.gpu_share && gpus.count == 0 {
            return Err(OptionError::GpuShareWithoutGpus);
        }
        if let Some(nodes) = &self.nodes
            && !matches!(nodes.trim(), "1" | "1-1")
        {
            return Err(OptionError::MultiNode(nodes.clone()));
        }
        let cpus_per_task = self.cpus_per_task.unwrap_or(1);
        let ntasks = self.ntasks.unwrap_or(1);
        if cpus_per_task == 0 || ntasks == 0 {
            return Err(OptionError::ZeroCpus);
        }
        if self.mail_type.is_some() || self.mail_user.is_some() {
            warnings.push("--mail-type/--mail-user ignored: labpool sends no mail".to_string());
        }
        if self.qos.is_some() {
            warnings.push("--qos ignored: labpool's limits come from accounts and users (`labpool account list`)".to_string());
        }
        if let Some(d) = &self.dependency {
            parse_dependencies(d)?;
        }
        if let Some(a) = &self.array {
            parse_array(a)?;
        }
        if self.exclusive.is_some() {
            warnings.push(
                "--exclusive ignored: the job holds only the GPUs, cores and memory it asks for"
                    .to_string(),
            );
        }
        if let Some(name) = &self.job_name {
            check_name(name)?;
        }
        Ok(JobRequest {
            name: self.job_name.clone(),
            gpus,
            cpus: cpus_per_task.saturating_mul(ntasks),
            mem_mib: self
                .mem
                .as_deref()
                .map(parse_mem_mib)
                .transpose()?
                .unwrap_or(0),
            time_limit: self.time.as_deref().map(parse_time_limit).transpose()?,
            output: self.output.clone(),
            error: self.error.clone(),
            partition: self.partition.clone(),
            chdir: self.chdir.clone(),
            export: self
                .export
                .as_deref()
                .map(parse_export)
                .transpose()?
                .unwrap_or_default(),
            account: self.account.clone(),
            dependency: self.dependency.clone(),
            array: self.array.clone(),
            datasets: self.datasets.clone(),
            emergency: self.emergency,
            gpu_share: self.gpu_share,
            no_requeue: self.no_requeue && !self.requeue,
            env: self.env.clone(),
            warnings,
        })
    }
}
