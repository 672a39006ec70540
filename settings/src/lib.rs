//! The config file (`labpool.toml`): where it is, what it holds, and its checks.
//!
//! Precedence: `--config FILE`, then `$LABPOOL_CONFIG`, then `/etc/labpool/labpool.toml`.
//! Unknown keys are refused, with the line and the key, so a typo never passes silently.
//! Relative paths in the file are taken relative to the file's own directory.
//!
//! One file per section: each defines its table, its defaults, makes its own paths absolute
//! and checks its own values. This file holds [`Config`], finding and loading it, the checks
//! that span sections, and the values derived from several sections.
//!
//! The controller, the node agent and the commands all read it: it is a crate of its own so
//! that none of them owns it. [`schedule`] (the cron times of timed services) and
//! [`copy_target`] (where an off-box copy goes) are the grammars of two of its values.

mod agent;
mod alerts;
mod cache;
mod client;
mod controller;
pub mod copy_target;
mod datasets;
mod envs;
mod executor;
mod jobs;
mod mail;
mod metrics;
mod node;
mod partitions;
mod policy;
mod purge;
mod quotas;
pub mod reload;
mod reports;
pub mod schedule;
mod snapshots;
#[cfg(test)]
mod tests;
mod values;
mod web;

pub use agent::AgentConfig;
pub use alerts::AlertsConfig;
pub use cache::CacheConfig;
pub use controller::ControllerConfig;
pub use datasets::DatasetsConfig;
pub use envs::EnvsConfig;
pub use executor::{ExecutorConfig, ExecutorKind};
pub use jobs::{IsolationMode, JobsConfig, OverridePolicy};
pub use mail::MailConfig;
pub use metrics::{AGENT_METRICS, CONTROLLER_METRICS, MetricsConfig, ZombiesConfig};
pub use node::{GpuShare, GpuSlices, NodeConfig, VirtualGpus};
pub use partitions::PartitionConfig;
pub use policy::{CreditsConfig, PreemptionConfig, PriorityConfig};
pub use purge::PurgeConfig;
pub use quotas::{QuotaFs, QuotaFsConfig, QuotasConfig};
pub use reports::ReportsConfig;
pub use snapshots::{SnapshotSource, SnapshotsConfig, default_snapshot_schedule};
pub use web::WebConfig;

use labpool_scheduler::partition::{Partition, check_partitions};
use labpool_scheduler::policy::{PlacementPolicy, Policy};
use partitions::default_partitions;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where the config is looked for when neither `--config` nor `$LABPOOL_CONFIG` names one.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/labpool/labpool.toml";

/// The whole config file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The controller daemon.
    pub controller: ControllerConfig,
    /// This node.
    #[serde(default)]
    pub node: NodeConfig,
    /// Partitions (queues).
    #[serde(default = "default_partitions", rename = "partition")]
    pub partitions: Vec<PartitionConfig>,
    /// Credits and the emergency lane.
    #[serde(default)]
    pub credits: CreditsConfig,
    /// Priority weights.
    #[serde(default)]
    pub priority: PriorityConfig,
    /// `[preemption]`: notice, grace and minimum runtime.
    #[serde(default)]
    pub preemption: PreemptionConfig,
    /// Where registered datasets live.
    #[serde(default)]
    pub datasets: DatasetsConfig,
    /// This node's dataset cache.
    #[serde(default)]
    pub cache: CacheConfig,
    /// `[snapshots]`: nightly deduplicated backups of shared data.
    #[serde(default)]
    pub snapshots: SnapshotsConfig,
    /// `[quotas]`: home and scratch, their per-user limits and the usage scan.
    #[serde(default)]
    pub quotas: QuotasConfig,
    /// `[purge]`: the scratch purge.
    #[serde(default)]
    pub purge: PurgeConfig,
    /// `[alerts]`: where notices are posted.
    #[serde(default)]
    pub alerts: AlertsConfig,
    /// `[metrics]`: GPU sampling and the Prometheus endpoint.
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// `[zombies]`: jobs holding GPUs they do not use.
    #[serde(default)]
    pub zombies: ZombiesConfig,
    /// `[mail]`: job notifications by e-mail.
    #[serde(default)]
    pub mail: MailConfig,
    /// `[reports]`: what usage reports show.
    #[serde(default)]
    pub reports: ReportsConfig,
    /// `[executor]`: labpool's agents, or the lab's Slurm.
    #[serde(default)]
    pub executor: ExecutorConfig,
    /// `[web]`: the dashboard for browsers.
    #[serde(default)]
    pub web: WebConfig,
    /// `[jobs]`: the rules every job's environment follows.
    #[serde(default)]
    pub jobs: JobsConfig,
    /// `[envs]`: where software environments are built and kept.
    #[serde(default)]
    pub envs: EnvsConfig,
    /// `[agent]`: this node joins a controller elsewhere.
    #[serde(default)]
    pub agent: Option<AgentConfig>,
    /// Where the file was read from (never read from the file; shown by `--show-settings`).
    #[serde(skip_deserializing)]
    pub path: PathBuf,
}

/// Why the config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No file at the path.
    #[error(
        "no config file at {path}{why}\nhint: create one with `sudo labpool init` (this default path), or with `labpool init --dir DIR`, then pass --config DIR/labpool.toml or set LABPOOL_CONFIG"
    )]
    Missing {
        /// Where it was looked for.
        path: PathBuf,
        /// How that path was chosen.
        why: &'static str,
    },
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid.
    #[error("config {path} is not valid: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and key where TOML knows them.
        message: String,
    },
}

impl Config {
    /// Finds and loads the config: `explicit` (from `--config` or `$LABPOOL_CONFIG`), else the
    /// default path.
    pub fn locate(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        Config::load(&Config::path_of(explicit)?)
    }

    /// The file [`Config::locate`] reads: `explicit`, else the default path; an error if it
    /// does not exist.
    fn path_of(explicit: Option<&Path>) -> Result<PathBuf, ConfigError> {
        let (path, why) = match explicit {
            Some(p) => (p.to_path_buf(), " (from --config or LABPOOL_CONFIG)"),
            None => (
                PathBuf::from(DEFAULT_CONFIG_PATH),
                " (the default; neither --config nor LABPOOL_CONFIG was given)",
            ),
        };
        if !path.exists() {
            return Err(ConfigError::Missing { path, why });
        }
        Ok(path)
    }

    /// Loads and checks one file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let (text, path) = Config::read(path)?;
        Config::parse(&text, &path)
    }

    /// The text of the file at `path`, and the path made absolute (for relative paths in it
    /// and for messages).
    fn read(path: &Path) -> Result<(String, PathBuf), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Ok((
            text,
            std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        ))
    }

    /// `text` as TOML into `T`; a mistake is [`ConfigError::Invalid`], naming `path`.
    fn from_toml<T: serde::de::DeserializeOwned>(
        text: &str,
        path: &Path,
    ) -> Result<T, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })
    }

    /// Parses config text that lives at `path` (for relative paths and messages).
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let mut config: Config = Config::from_toml(text, path)?;
        config.path = path.to_path_buf();
        config.rebase(path.parent().unwrap_or(Path::new("/")));
        config.metrics.resolve(config.agent.is_some());
        config.check().map_err(invalid)?;
        Ok(config)
    }

    /// The resolved settings as `--show-settings` prints them: pretty JSON with sorted keys,
    /// durations and time limits written as in the file.
    pub fn settings_json(&self) -> serde_json::Result<String> {
        let mut value = serde_json::to_value(self)?;
        value.sort_all_objects();
        serde_json::to_string_pretty(&value)
    }

    /// Makes every path in the file absolute, relative to `base`, the file's directory.
    fn rebase(&mut self, base: &Path) {
        self.controller.rebase(base);
        if let Some(a) = self.agent.as_mut() {
            a.rebase(base);
        }
        self.node.rebase(base);
        self.datasets.rebase(base);
        self.cache.rebase(base);
        self.envs.rebase(base);
        self.snapshots.rebase(base);
        self.quotas.rebase(base);
        if let Some(p) = self.alerts.webhook_file.as_mut() {
            rebase(base, p);
        }
        self.executor.rebase(base);
    }

    /// Every section's checks and those across sections. The order is kept as it was when
    /// they were one function, so a file with several mistakes is told the same one first.
    fn check(&self) -> Result<(), String> {
        self.node.check_gpu_share()?;
        self.node.check_slices()?;
        self.node.check_nvlink_pairs()?;
        self.controller.check_log()?;
        self.jobs.check()?;
        self.cache.check_watermarks()?;
        if self.cache.workers == 0 || self.datasets.scan_threads == 0 {
            return Err(
                "[cache] workers and [datasets] scan_threads must be at least 1".to_string(),
            );
        }
        check_partitions(&self.scheduler_partitions()).map_err(|e| e.to_string())?;
        for p in &self.partitions {
            partitions::check_idle(
                &format!("[[partition]] {}", p.name),
                p.idle_gpu_percent,
                p.idle_grace,
            )?;
        }
        self.node.check_name()?;
        self.node.check_features()?;
        self.credits.check()?;
        self.quota_filesystems()?;
        self.quotas.check_schedule()?;
        self.purge.check_schedule()?;
        self.datasets.check_schedule()?;
        self.purge.check_max_age()?;
        self.alerts.check()?;
        self.metrics.check()?;
        self.web.check()?;
        self.executor.check()?;
        self.zombies.check()?;
        self.mail.check()?;
        snapshots::check_sources(&self.snapshot_sources())?;
        self.snapshots.check_copy()?;
        self.node.check_cpus()?;
        Ok(())
    }

    /// The idle rule of sessions in `partition`: its own values, else `[jobs]`'s.
    pub fn idle_rule(&self, partition: &str) -> labpool_monitor::idle_sessions::Rule {
        let p = self.partitions.iter().find(|p| p.name == partition);
        let ms = |d: std::time::Duration| d.as_millis().min(i64::MAX as u128) as i64;
        labpool_monitor::idle_sessions::Rule {
            busy_percent: p
                .and_then(|p| p.idle_gpu_percent)
                .unwrap_or(self.jobs.idle_gpu_percent),
            idle_after_ms: ms(p
                .and_then(|p| p.idle_after)
                .unwrap_or(self.jobs.interactive_idle)),
            grace_ms: ms(p.and_then(|p| p.idle_grace).unwrap_or(self.jobs.idle_grace)),
        }
    }

    /// The partitions as the scheduler takes them.
    pub fn scheduler_partitions(&self) -> Vec<Partition> {
        self.partitions
            .iter()
            .map(PartitionConfig::to_scheduler)
            .collect()
    }

    /// The scheduling policy the config describes.
    pub fn policy(&self) -> Policy {
        Policy {
            credits: self.credits.to_policy(),
            weights: self.priority.to_weights(),
            placement: PlacementPolicy {
                prefetch_horizon_s: Some(self.cache.prefetch_horizon.as_secs()).filter(|s| *s > 0),
                locality_wait_s: Some(self.cache.locality_wait.as_secs()).filter(|s| *s > 0),
                stage_in_wait_s: Some(self.cache.stage_in_wait.as_secs()).filter(|s| *s > 0),
                // Checked when the config is read.
                ports: self
                    .jobs
                    .port_range()
                    .unwrap_or(labpool_scheduler::policy::default_ports()),
                ..PlacementPolicy::default()
            },
            preemption: self.preemption.to_policy(),
        }
    }

    /// The cluster key file: `[agent] key` on an agent, `[controller] key` on a controller,
    /// by default `cluster.key` beside the config.
    pub fn cluster_key_path(&self) -> PathBuf {
        if let Some(a) = &self.agent {
            return a.key.clone();
        }
        self.controller.key.clone().unwrap_or_else(|| {
            self.path
                .parent()
                .unwrap_or(Path::new("/"))
                .join("cluster.key")
        })
    }

    /// The job spool directory.
    pub fn spool_dir(&self) -> PathBuf {
        self.node
            .spool_dir
            .clone()
            .unwrap_or_else(|| self.controller.state_dir.join("spool"))
    }

    /// The node's dataset cache root.
    pub fn cache_dir(&self) -> PathBuf {
        self.cache
            .dir
            .clone()
            .unwrap_or_else(|| self.controller.state_dir.join("cache"))
    }

    /// Where environment builds live (the same path on every node).
    pub fn env_store(&self) -> PathBuf {
        self.envs
            .store
            .clone()
            .unwrap_or_else(|| self.controller.state_dir.join("envs"))
    }

    /// Where packed environment builds are kept.
    pub fn env_archive_dir(&self) -> PathBuf {
        self.envs
            .archive
            .clone()
            .unwrap_or_else(|| self.controller.state_dir.join("env-archives"))
    }

    /// Where the controller keeps dataset manifests: one file per version.
    pub fn manifests_dir(&self) -> PathBuf {
        self.controller.state_dir.join("datasets")
    }

    /// The state database file.
    pub fn database_path(&self) -> PathBuf {
        self.controller.state_dir.join("labpool.db")
    }

    /// The snapshot repository.
    pub fn snapshot_repo(&self) -> PathBuf {
        self.snapshots
            .repo
            .clone()
            .unwrap_or_else(|| self.controller.state_dir.join("snapshots"))
    }

    /// The directory that holds the datasets root, `home` and `scratch` by default.
    fn shared_root(&self) -> PathBuf {
        let root = &self.datasets.root;
        root.parent().unwrap_or(root).to_path_buf()
    }

    /// The limited file systems, `home` then `scratch`, with their default limits.
    pub fn quota_filesystems(&self) -> Result<Vec<QuotaFs>, String> {
        self.quotas.filesystems(&self.shared_root())
    }

    /// The backed-up sources: as configured, else the datasets root and `home` beside it.
    pub fn snapshot_sources(&self) -> Vec<SnapshotSource> {
        if let Some(s) = &self.snapshots.sources {
            return s.clone();
        }
        let root = &self.datasets.root;
        let home = self
            .quotas
            .home
            .as_ref()
            .and_then(|h| h.root.clone())
            .unwrap_or_else(|| self.shared_root().join("home"));
        let source = |name: &str, path: PathBuf| SnapshotSource {
            name: name.into(),
            path,
            schedule: snapshots::default_snapshot_schedule(),
            exclude: Vec::new(),
            one_file_system: true,
        };
        vec![source("datasets", root.clone()), source("home", home)]
    }

    /// The retention policy applied after each scheduled backup.
    pub fn snapshot_policy(&self) -> labpool_snapshots::Policy {
        self.snapshots.policy()
    }
}

/// Makes `p` absolute: a relative path in the file is relative to `base`, the file's directory.
fn rebase(base: &Path, p: &mut PathBuf) {
    if p.is_relative() {
        *p = base.join(&*p);
    }
}

/// A crontab schedule parses; `""` (off) passes.
fn check_schedule(what: &str, text: &str) -> Result<(), String> {
    if !text.is_empty() {
        crate::schedule::Schedule::parse(text).map_err(|e| format!("{what} {text:?}: {e}"))?;
    }
    Ok(())
}
