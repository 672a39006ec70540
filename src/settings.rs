//! The config file (`labpool.toml`): where it is, what it holds, and its checks.
//!
//! Precedence: `--config FILE`, then `$LABPOOL_CONFIG`, then `/etc/labpool/labpool.toml`.
//! Unknown keys are refused, with the line and the key, so a typo never passes silently.
//! Relative paths in the file are taken relative to the file's own directory.

use labpool_scheduler::partition::{Partition, check_partitions};
use labpool_scheduler::policy::{CreditPolicy, PlacementPolicy, Policy, PriorityWeights};
use labpool_scheduler::size::parse_mem_mib;
use labpool_scheduler::time::{TimeLimit, parse_time_limit};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the config is looked for when neither `--config` nor `$LABPOOL_CONFIG` names one.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/labpool/labpool.toml";

/// The whole config file.
#[derive(Debug, Clone, Deserialize)]
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
    /// `[jobs]`: the rules every job's environment follows.
    #[serde(default)]
    pub jobs: JobsConfig,
    /// `[envs]`: where software environments are built and kept.
    #[serde(default)]
    pub envs: EnvsConfig,
    /// `[agent]`: this node joins a controller elsewhere.
    #[serde(default)]
    pub agent: Option<AgentConfig>,
    /// Where the file was read from.
    #[serde(skip)]
    pub path: PathBuf,
}

/// `[controller]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerConfig {
    /// Directory of the state database and the controller lock.
    pub state_dir: PathBuf,
    /// Unix socket the CLI talks to.
    pub socket: PathBuf,
    /// Log file of `labpool serve`; logs also go to standard error.
    #[serde(default)]
    pub log_file: Option<PathBuf>,
    /// Members of this Unix group (and root) may act on every job.
    #[serde(default = "default_admin_group")]
    pub admin_group: String,
    /// Time between TERM and KILL when a job is cancelled or reaches its time limit.
    #[serde(default = "default_kill_grace", deserialize_with = "de_duration")]
    pub kill_grace: Duration,
    /// Address node agents join at, `HOST:PORT` (`labpool init` writes a loopback one; give
    /// the LAN address to take agents from other machines). Absent: one box, no agents.
    #[serde(default)]
    pub listen: Option<String>,
    /// The cluster key file that agents' requests are signed with [default: cluster.key beside
    /// this file].
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// A node whose agent sends no heartbeat for this long goes DOWN and its jobs are requeued.
    #[serde(default = "default_node_timeout", deserialize_with = "de_duration")]
    pub node_timeout: Duration,
    /// Requests whose signing clock is further than this from ours are refused.
    #[serde(default = "default_max_clock_skew", deserialize_with = "de_duration")]
    pub max_clock_skew: Duration,
    /// Run this machine's own agent inside the controller (the one-box default). False for a
    /// controller that only schedules for agents on other machines.
    #[serde(default = "yes")]
    pub local_node: bool,
}

/// `[agent]`: present in the config of a node that joins a controller (`labpool agent`). In
/// such a config `[controller] state_dir` and `socket` are the agent's own: its job spool and
/// the socket this node's CLI talks to (the agent forwards to the controller).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The controller's `listen` address, `HOST:PORT`.
    pub join: String,
    /// The cluster key file, a copy of the controller's (mode 0600).
    pub key: PathBuf,
    /// Where this agent takes orders and peers' stage requests, `HOST:PORT` (port 0: any).
    #[serde(default = "default_agent_listen")]
    pub listen: String,
    /// The address others reach this agent at [default: the host the controller sees the
    /// agent's connections come from, with the listening port].
    #[serde(default)]
    pub advertise: Option<String>,
    /// Time between heartbeats.
    #[serde(default = "default_heartbeat", deserialize_with = "de_duration")]
    pub heartbeat: Duration,
}

fn default_node_timeout() -> Duration {
    Duration::from_secs(300)
}

fn default_max_clock_skew() -> Duration {
    Duration::from_secs(300)
}

fn default_heartbeat() -> Duration {
    Duration::from_secs(10)
}

fn default_agent_listen() -> String {
    "0.0.0.0:7071".to_string()
}

/// `[node]`: this machine as the in-process agent reports it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// Node name [default: the host name].
    pub name: Option<String>,
    /// Job spool: one directory per running job [default: STATE_DIR/spool].
    pub spool_dir: Option<PathBuf>,
    /// CPU cores the pool may use [default: all].
    pub cpus: Option<u32>,
    /// Memory the pool may use, e.g. "60G" [default: all].
    #[serde(default, deserialize_with = "de_opt_mem")]
    pub memory: Option<u64>,
    /// Virtual GPUs, "N" or "N:TYPE": used instead of NVML, for CPU-only boxes and tests.
    #[serde(default, deserialize_with = "de_opt_virtual_gpus")]
    pub virtual_gpus: Option<VirtualGpus>,
    /// Where to load NVML from [default: the system's libnvidia-ml.so.1].
    pub nvml_library: Option<PathBuf>,
    /// How many `--gpu-share` jobs may hold one GPU at once: a number for every GPU of the
    /// node, or a table by GPU type (`{ rtx3090 = 2 }`) [default: 1, no sharing].
    #[serde(default)]
    pub gpu_share: Option<GpuShare>,
}

/// `gpu_share = 2` or `gpu_share = { rtx3090 = 2, a100 = 1 }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum GpuShare {
    /// The same for every GPU.
    All(u32),
    /// By GPU type; types not named are not shared.
    ByType(BTreeMap<String, u32>),
}

impl GpuShare {
    /// The share of a GPU of `gpu_type`.
    pub fn of(&self, gpu_type: &str) -> u32 {
        match self {
            GpuShare::All(n) => *n,
            GpuShare::ByType(m) => m.get(gpu_type).copied().unwrap_or(1),
        }
    }
}

/// What a job script may do with `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OverridePolicy {
    /// A script that sets it is refused at submit.
    #[default]
    Refuse,
    /// It is accepted, with a warning.
    Warn,
}

/// Whether jobs are put in cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum IsolationMode {
    /// Device and memory isolation wherever the node's kernel offers it.
    #[default]
    Auto,
    /// None (jobs see every GPU device node; `--mem` is only a reservation).
    Off,
}

/// `[jobs]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobsConfig {
    /// "refuse" (default) or "warn": a script that sets `CUDA_VISIBLE_DEVICES`.
    pub cuda_visible_devices: OverridePolicy,
    /// "auto" (default) or "off": cgroup device and memory isolation.
    pub isolation: IsolationMode,
    /// How devices are filtered: "auto" (the v1 devices controller where mounted, else a BPF
    /// filter on cgroup v2), "cgroup-v1" or "bpf".
    pub device_filter: crate::agent::isolation::DeviceFilter,
    /// Variables every job gets unless its own environment sets them. Keys here replace the
    /// built-in defaults (memory growth, async allocator, PCI bus order); an empty value drops
    /// a default.
    pub gpu_env: BTreeMap<String, String>,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            cuda_visible_devices: OverridePolicy::Refuse,
            isolation: IsolationMode::Auto,
            device_filter: crate::agent::isolation::DeviceFilter::Auto,
            gpu_env: BTreeMap::new(),
        }
    }
}

impl JobsConfig {
    /// The hygiene variables: the built-in defaults with the config's changes.
    pub fn gpu_env(&self) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = labpool_envs::hygiene::GPU_DEFAULTS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for (k, v) in &self.gpu_env {
            if v.is_empty() {
                env.remove(k);
            } else {
                env.insert(k.clone(), v.clone());
            }
        }
        env
    }
}

/// `[envs]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvsConfig {
    /// Where builds live, at the same path on every node, because Python environments are not
    /// relocatable [default: STATE_DIR/envs].
    pub store: Option<PathBuf>,
    /// Where packed builds (tar + zstd) are kept for nodes to stage from; shared storage in a
    /// pool of several nodes [default: STATE_DIR/env-archives].
    pub archive: Option<PathBuf>,
    /// The Python that venvs are built with [default: /usr/bin/python3, else python3 on PATH].
    pub python: Option<PathBuf>,
    /// Most time one build may take, e.g. "30m".
    #[serde(deserialize_with = "de_duration")]
    pub build_timeout: Duration,
    /// The unprivileged user venv, conda and modules builds run as [default: nobody].
    #[serde(default = "default_build_user")]
    pub build_user: String,
}

fn default_build_user() -> String {
    "nobody".to_string()
}

impl Default for EnvsConfig {
    fn default() -> Self {
        EnvsConfig {
            store: None,
            archive: None,
            python: None,
            build_timeout: Duration::from_secs(30 * 60),
            build_user: default_build_user(),
        }
    }
}

/// `virtual_gpus = "4:rtx4090"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualGpus {
    /// How many.
    pub count: u32,
    /// Their type.
    pub gpu_type: String,
}

impl VirtualGpus {
    /// Parses `N` or `N:TYPE`.
    pub fn parse(text: &str) -> Result<VirtualGpus, String> {
        let (n, ty) = text.split_once(':').unwrap_or((text, "virtual"));
        let count: u32 = n.trim().parse().map_err(|_| {
            format!("invalid virtual GPUs '{text}': write N or N:TYPE, e.g. 4:rtx4090")
        })?;
        let ok = !ty.is_empty()
            && ty
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok || count == 0 || count > 64 {
            return Err(format!(
                "invalid virtual GPUs '{text}': write N or N:TYPE with 1 to 64 GPUs, e.g. 4:rtx4090"
            ));
        }
        Ok(VirtualGpus {
            count,
            gpu_type: ty.to_ascii_lowercase(),
        })
    }
}

/// `[credits]`: the second seed lab's scheme.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CreditsConfig {
    /// Credits every user gets at the start of each month.
    pub monthly_grant: f64,
    /// Credits per GPU-hour by GPU type, e.g. `{ a100 = 2.0, rtx4090 = 1.0 }`.
    pub gpu_weights: BTreeMap<String, f64>,
    /// Credits per GPU-hour of types not listed.
    pub default_weight: f64,
    /// Emergency tokens per user per month.
    pub emergency_tokens: u32,
    /// Most GPUs an emergency job may ask for.
    pub emergency_max_gpus: u32,
    /// Longest time limit of an emergency job (Slurm format).
    #[serde(deserialize_with = "de_time")]
    pub emergency_max_time: TimeLimit,
    /// Share of a charge given back to jobs with GPU utilisation of at least `rebate_min_util`
    /// (needs GPU metrics; 0 switches rebates off).
    pub rebate_fraction: f64,
    /// Utilisation (0 to 1) that earns a rebate.
    pub rebate_min_util: f64,
}

impl Default for CreditsConfig {
    fn default() -> Self {
        let d = CreditPolicy::default();
        CreditsConfig {
            monthly_grant: d.monthly_grant,
            gpu_weights: d.gpu_weights,
            default_weight: d.default_weight,
            emergency_tokens: d.emergency_tokens,
            emergency_max_gpus: d.emergency_max_gpus,
            emergency_max_time: TimeLimit::Seconds(d.emergency_max_time_s),
            rebate_fraction: d.rebate_fraction,
            rebate_min_util: d.rebate_min_util,
        }
    }
}

/// `[datasets]`: the shared storage that datasets are registered from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatasetsConfig {
    /// Only directories under this root may be registered.
    pub root: PathBuf,
    /// Threads that walk a source when it is registered or rescanned.
    pub scan_threads: usize,
    /// When the read-only audit runs (crontab syntax); `""` turns it off.
    pub audit_schedule: String,
}

impl Default for DatasetsConfig {
    fn default() -> Self {
        DatasetsConfig {
            root: PathBuf::from("/shared/datasets"),
            scan_threads: 8,
            audit_schedule: "0 5 * * *".to_string(),
        }
    }
}

/// `[cache]`: the node-local copy of datasets that jobs read.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Cache root on the node's local disk [default: STATE_DIR/cache].
    pub dir: Option<PathBuf>,
    /// Most bytes the cache may hold, e.g. "500G" [default: 90% of its file system].
    #[serde(deserialize_with = "de_opt_size")]
    pub capacity: Option<u64>,
    /// Above this share of capacity, unpinned versions are removed after a stage...
    pub high_watermark: f64,
    /// ...until the cache is down to this share.
    pub low_watermark: f64,
    /// Files copied at once while staging; fewer spare the file server.
    pub workers: usize,
    /// Most bytes per second staging reads, e.g. "200M" [default: no limit].
    #[serde(deserialize_with = "de_opt_rate")]
    pub bandwidth: Option<u64>,
    /// How far ahead a queued job's data is staged on the node it is predicted to start on
    /// ("0s" switches prefetch off).
    #[serde(deserialize_with = "de_duration")]
    pub prefetch_horizon: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            dir: None,
            capacity: None,
            high_watermark: 0.9,
            low_watermark: 0.8,
            workers: 4,
            bandwidth: None,
            prefetch_horizon: Duration::from_secs(30 * 60),
        }
    }
}

/// `[priority]`: weights of Slurm-style multifactor priority within a tier.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PriorityConfig {
    /// Weight of time waiting.
    pub weight_age: f64,
    /// Weight of fair-share.
    pub weight_fairshare: f64,
    /// Weight of the partition's priority.
    pub weight_partition: f64,
    /// Waiting time at which the age factor is full.
    #[serde(deserialize_with = "de_duration")]
    pub max_age: Duration,
    /// Half-life of past usage in fair-share.
    #[serde(deserialize_with = "de_duration")]
    pub fairshare_half_life: Duration,
}

impl Default for PriorityConfig {
    fn default() -> Self {
        let d = PriorityWeights::default();
        PriorityConfig {
            weight_age: d.age,
            weight_fairshare: d.fairshare,
            weight_partition: d.partition,
            max_age: Duration::from_secs(d.max_age_s),
            fairshare_half_life: Duration::from_secs(d.half_life_s),
        }
    }
}

/// `[[partition]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionConfig {
    /// Name.
    pub name: String,
    /// Jobs that name no partition go to the default one.
    #[serde(default)]
    pub default: bool,
    /// Higher is scheduled first.
    #[serde(default)]
    pub priority: u32,
    /// Node names [default: every node].
    #[serde(default)]
    pub nodes: Option<Vec<String>>,
    /// Time limit of a job that gives none (Slurm format).
    #[serde(deserialize_with = "de_time")]
    pub default_time: TimeLimit,
    /// Longest time limit a job may ask for (Slurm format, or UNLIMITED).
    #[serde(deserialize_with = "de_time")]
    pub max_time: TimeLimit,
    /// Accounts whose jobs may use it [default: everyone].
    #[serde(default)]
    pub allow_accounts: Option<Vec<String>>,
    /// Most GPUs one job may ask for here.
    #[serde(default)]
    pub max_gpus_per_job: Option<u32>,
}

fn default_admin_group() -> String {
    "labpool-admins".to_string()
}

/// `[snapshots]`: the backup repository, what is backed up when, and how long it is kept.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SnapshotsConfig {
    /// The repository, on the backup disk [default: STATE_DIR/snapshots].
    pub repo: Option<PathBuf>,
    /// Run the scheduled backups in the controller.
    pub enabled: bool,
    /// Retention after each scheduled run: the newest N snapshots...
    pub keep_last: u32,
    /// ...the newest of each of the last N days...
    pub keep_daily: u32,
    /// ...of each of the last N ISO weeks...
    pub keep_weekly: u32,
    /// ...and of each of the last N months.
    pub keep_monthly: u32,
    /// What is backed up [default: `datasets` (the datasets root) and `home` (`home` beside
    /// it), nightly at 03:00].
    #[serde(rename = "source")]
    pub sources: Option<Vec<SnapshotSource>>,
}

impl Default for SnapshotsConfig {
    fn default() -> Self {
        SnapshotsConfig {
            repo: None,
            enabled: true,
            keep_last: 0,
            keep_daily: 7,
            keep_weekly: 4,
            keep_monthly: 6,
            sources: None,
        }
    }
}

/// `[[snapshots.source]]`: one directory tree backed up on a schedule.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SnapshotSource {
    /// Its name in `snapshot list` and `create --source`.
    pub name: String,
    /// The directory.
    pub path: PathBuf,
    /// When, in crontab syntax (`0 3 * * *`); a sixth leading field gives seconds.
    #[serde(default = "default_snapshot_schedule")]
    pub schedule: String,
    /// Glob patterns to leave out (`*.tmp`, `**/__pycache__`).
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Stay on the source's file system (mount points are kept empty).
    #[serde(default = "yes")]
    pub one_file_system: bool,
}

/// `[quotas]`: the two limited file systems and the usage scan.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct QuotasConfig {
    /// When usage is scanned (crontab syntax) [default: hourly]; `""` turns it off.
    pub scan_schedule: Option<String>,
    /// Threads a scan walks with (more than the cores: a cold walk waits on the disk).
    pub scan_threads: Option<usize>,
    /// `[quotas.home]` [default: `home` beside the datasets root].
    pub home: Option<QuotaFsConfig>,
    /// `[quotas.scratch]` [default: `scratch` beside the datasets root].
    pub scratch: Option<QuotaFsConfig>,
}

/// `[quotas.home]`, `[quotas.scratch]`: a root, where each user's directory is, and the limits
/// for users with none of their own (a limit left out is no limit).
#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct QuotaFsConfig {
    /// The file system's root.
    pub root: Option<PathBuf>,
    /// Each user's directory below the root; `{user}` is the login name [default: `{user}`].
    pub layout: Option<String>,
    /// Soft byte limit (`40G`).
    pub soft: Option<String>,
    /// Hard byte limit (`50G`).
    pub hard: Option<String>,
    /// Soft limit on entries.
    pub files_soft: Option<u64>,
    /// Hard limit on entries.
    pub files_hard: Option<u64>,
    /// Time allowed over a soft limit (`7d`).
    pub grace: Option<String>,
}

/// One limited file system, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaFs {
    /// `home` or `scratch`.
    pub name: String,
    /// Its root.
    pub root: PathBuf,
    /// Each user's directory below the root, `{user}` for the name.
    pub layout: String,
    /// Limits for users with none of their own.
    pub default_limit: labpool_quotas::limits::Limit,
}

impl QuotaFs {
    /// A user's directory.
    pub fn user_dir(&self, user: &str) -> PathBuf {
        self.root.join(self.layout.replace("{user}", user))
    }
}

/// `[purge]`: files in scratch untouched this long are deleted, after a notice.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PurgeConfig {
    /// Run the scheduled purge in the controller.
    pub enabled: bool,
    /// When (crontab syntax).
    pub schedule: String,
    /// Age after which a file goes (newest of atime, mtime, ctime).
    #[serde(with = "humantime_serde_days")]
    pub max_age: Duration,
    /// Days of notice before a file goes.
    pub warn_days: u32,
}

impl Default for PurgeConfig {
    fn default() -> Self {
        PurgeConfig {
            enabled: true,
            schedule: "0 4 * * *".to_string(),
            max_age: Duration::from_secs(30 * 86_400),
            warn_days: 7,
        }
    }
}

/// Durations written as humantime text (`30d`).
mod humantime_serde_days {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text)
            .map_err(|e| serde::de::Error::custom(format!("{text:?}: {e} (write e.g. \"30d\")")))
    }
}

/// `[alerts]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct AlertsConfig {
    /// A URL (`http://host:port/path`) that notices are POSTed to as JSON.
    pub webhook: Option<String>,
}

fn default_snapshot_schedule() -> String {
    "0 3 * * *".to_string()
}

fn yes() -> bool {
    true
}

fn default_kill_grace() -> Duration {
    Duration::from_secs(30)
}

fn default_partitions() -> Vec<PartitionConfig> {
    let part = |name: &str, default, priority, default_time, max_time| PartitionConfig {
        name: name.into(),
        default,
        priority,
        nodes: None,
        default_time: TimeLimit::Seconds(default_time),
        max_time: TimeLimit::Seconds(max_time),
        allow_accounts: None,
        max_gpus_per_job: None,
    };
    vec![
        // Deadline work: an admin grants it by adding people to the `deadline` account.
        PartitionConfig {
            allow_accounts: Some(vec!["deadline".into()]),
            ..part("high", false, 100, 86_400, 3 * 86_400)
        },
        part("normal", true, 10, 86_400, 7 * 86_400),
        // Short and small: for trying code.
        PartitionConfig {
            max_gpus_per_job: Some(1),
            ..part("debug", false, 50, 1800, 3600)
        },
        part("interactive", false, 30, 3600, 4 * 3600),
    ]
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s).map_err(|e| {
        serde::de::Error::custom(format!(
            "invalid duration '{s}' ({e}); write e.g. \"30s\" or \"2m\""
        ))
    })
}

fn de_time<'de, D: Deserializer<'de>>(d: D) -> Result<TimeLimit, D::Error> {
    let s = String::deserialize(d)?;
    parse_time_limit(&s).map_err(serde::de::Error::custom)
}

fn de_opt_mem<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let s = String::deserialize(d)?;
    parse_mem_mib(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn de_opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let s = String::deserialize(d)?;
    labpool_sim::config::parse_size(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn de_opt_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let s = String::deserialize(d)?;
    labpool_sim::config::parse_rate(&s)
        .map(|r| Some(r as u64))
        .map_err(serde::de::Error::custom)
}

fn de_opt_virtual_gpus<'de, D: Deserializer<'de>>(d: D) -> Result<Option<VirtualGpus>, D::Error> {
    let s = String::deserialize(d)?;
    VirtualGpus::parse(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// Source names are unique words, schedules parse, and paths are absolute.
fn check_snapshot_sources(sources: &[SnapshotSource]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for s in sources {
        if s.name.is_empty()
            || s.name == "path"
            || !s
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "[[snapshots.source]] name {:?}: use letters, digits, '-' and '_' (and not \"path\", which marks ad-hoc snapshots)",
                s.name
            ));
        }
        if !seen.insert(&s.name) {
            return Err(format!(
                "[[snapshots.source]] name {:?} is given twice",
                s.name
            ));
        }
        crate::schedule::Schedule::parse(&s.schedule)
            .map_err(|e| format!("[[snapshots.source]] {}: {e}", s.name))?;
    }
    Ok(())
}

/// Why the config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No file at the path.
    #[error(
        "no config file at {path}{why}\nhint: create one with `labpool init --dir DIR`, then pass --config DIR/labpool.toml or set LABPOOL_CONFIG"
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
        Config::load(&path)
    }

    /// Loads and checks one file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Config::parse(&text, &path)
    }

    /// Parses config text that lives at `path` (for relative paths and messages).
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let mut config: Config =
            toml::from_str(text).map_err(|e| invalid(e.to_string().trim_end().to_string()))?;
        config.path = path.to_path_buf();
        let base = path.parent().unwrap_or(Path::new("/"));
        let abs = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        abs(&mut config.controller.state_dir);
        abs(&mut config.controller.socket);
        if let Some(p) = config.controller.key.as_mut() {
            abs(p);
        }
        if let Some(a) = config.agent.as_mut() {
            abs(&mut a.key);
        }
        if let Some(p) = config.controller.log_file.as_mut() {
            abs(p);
        }
        if let Some(p) = config.node.spool_dir.as_mut() {
            abs(p);
        }
        abs(&mut config.datasets.root);
        if let Some(p) = config.cache.dir.as_mut() {
            abs(p);
        }
        for p in [
            config.envs.store.as_mut(),
            config.envs.archive.as_mut(),
            config.envs.python.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            abs(p);
        }
        if let Some(share) = &config.node.gpu_share {
            let bad = match share {
                GpuShare::All(n) => !(1..=8).contains(n),
                GpuShare::ByType(m) => m.values().any(|n| !(1..=8).contains(n)),
            };
            if bad {
                return Err(invalid(
                    "[node] gpu_share: give 1 to 8 jobs per GPU (1 means no sharing), e.g. gpu_share = 2 or gpu_share = { rtx3090 = 2 }".to_string(),
                ));
            }
        }
        for k in config.jobs.gpu_env.keys() {
            if k == "CUDA_VISIBLE_DEVICES" || k.is_empty() || k.contains('=') {
                return Err(invalid(format!(
                    "[jobs] gpu_env: {k:?} cannot be set here (labpool sets CUDA_VISIBLE_DEVICES to each job's GPUs)"
                )));
            }
        }
        let k = &config.cache;
        if !(0.0 < k.low_watermark
            && k.low_watermark <= k.high_watermark
            && k.high_watermark <= 1.0)
        {
            return Err(invalid(format!(
                "[cache]: watermarks must satisfy 0 < low_watermark ({}) <= high_watermark ({}) <= 1",
                k.low_watermark, k.high_watermark
            )));
        }
        if k.workers == 0 || config.datasets.scan_threads == 0 {
            return Err(invalid(
                "[cache] workers and [datasets] scan_threads must be at least 1".to_string(),
            ));
        }
        check_partitions(&config.scheduler_partitions()).map_err(|e| invalid(e.to_string()))?;
        if let Some(name) = &config.node.name
            && (name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'))
        {
            return Err(invalid(format!(
                "[node] name {name:?}: use letters, digits, '-', '_' and '.'"
            )));
        }
        let c = &config.credits;
        if !(c.monthly_grant >= 0.0 && c.monthly_grant.is_finite())
            || c.gpu_weights
                .values()
                .chain([&c.default_weight])
                .any(|w| !(*w >= 0.0 && w.is_finite()))
        {
            return Err(invalid(
                "[credits]: grants and weights must be numbers of 0 or more".to_string(),
            ));
        }
        if !(0.0..=1.0).contains(&c.rebate_fraction) || !(0.0..=1.0).contains(&c.rebate_min_util) {
            return Err(invalid(
                "[credits]: rebate_fraction and rebate_min_util are between 0 and 1".to_string(),
            ));
        }
        if let Some(p) = config.snapshots.repo.as_mut() {
            abs(p);
        }
        if let Some(sources) = config.snapshots.sources.as_mut() {
            for src in sources.iter_mut() {
                abs(&mut src.path);
            }
        }
        for fs in [config.quotas.home.as_mut(), config.quotas.scratch.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(p) = fs.root.as_mut() {
                abs(p);
            }
        }
        config.quota_filesystems().map_err(invalid)?;
        for (what, text) in [
            (
                "[quotas] scan_schedule",
                config.quotas.scan_schedule.clone().unwrap_or_default(),
            ),
            ("[purge] schedule", config.purge.schedule.clone()),
            (
                "[datasets] audit_schedule",
                config.datasets.audit_schedule.clone(),
            ),
        ] {
            if !text.is_empty() {
                crate::schedule::Schedule::parse(&text)
                    .map_err(|e| invalid(format!("{what} {text:?}: {e}")))?;
            }
        }
        if config.purge.max_age.as_secs() <= u64::from(config.purge.warn_days) * 86_400 {
            return Err(invalid(format!(
                "[purge]: max_age ({}) must be longer than warn_days ({} days)",
                humantime::format_duration(config.purge.max_age),
                config.purge.warn_days
            )));
        }
        if let Some(w) = &config.alerts.webhook
            && !w.starts_with("http://")
        {
            return Err(invalid(format!(
                "[alerts] webhook {w:?}: give an http:// URL (https is not supported; use a local relay)"
            )));
        }
        check_snapshot_sources(&config.snapshot_sources()).map_err(invalid)?;
        if config.node.cpus == Some(0) {
            return Err(invalid(
                "[node] cpus = 0: give at least 1, or leave it out to use every core".to_string(),
            ));
        }
        Ok(config)
    }

    /// The partitions as the scheduler takes them.
    pub fn scheduler_partitions(&self) -> Vec<Partition> {
        self.partitions
            .iter()
            .map(|p| Partition {
                name: p.name.clone(),
                default: p.default,
                priority: p.priority,
                nodes: p.nodes.clone(),
                default_time: p.default_time,
                max_time: p.max_time,
                allow_accounts: p.allow_accounts.clone(),
                max_gpus_per_job: p.max_gpus_per_job,
            })
            .collect()
    }

    /// The scheduling policy the config describes.
    pub fn policy(&self) -> Policy {
        let c = &self.credits;
        let p = &self.priority;
        Policy {
            credits: CreditPolicy {
                monthly_grant: c.monthly_grant,
                gpu_weights: c.gpu_weights.clone(),
                default_weight: c.default_weight,
                emergency_tokens: c.emergency_tokens,
                emergency_max_gpus: c.emergency_max_gpus,
                emergency_max_time_s: match c.emergency_max_time {
                    TimeLimit::Seconds(s) => s,
                    TimeLimit::Unlimited => u64::MAX / 2,
                },
                rebate_fraction: c.rebate_fraction,
                rebate_min_util: c.rebate_min_util,
            },
            weights: PriorityWeights {
                age: p.weight_age,
                fairshare: p.weight_fairshare,
                partition: p.weight_partition,
                max_age_s: p.max_age.as_secs(),
                half_life_s: p.fairshare_half_life.as_secs(),
            },
            placement: PlacementPolicy {
                prefetch_horizon_s: Some(self.cache.prefetch_horizon.as_secs()).filter(|s| *s > 0),
                ..PlacementPolicy::default()
            },
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
        use labpool_quotas::size::{parse_duration, parse_size};
        let mut out = Vec::new();
        for (name, fs) in [
            ("home", &self.quotas.home),
            ("scratch", &self.quotas.scratch),
        ] {
            let fs = fs.clone().unwrap_or_default();
            let at = |key: &str| format!("[quotas.{name}] {key}");
            let size = |key: &str, v: &Option<String>| {
                v.as_deref()
                    .map(parse_size)
                    .transpose()
                    .map(Option::flatten)
                    .map_err(|e| format!("{}: {e}", at(key)))
            };
            let limit = labpool_quotas::limits::Limit {
                soft_bytes: size("soft", &fs.soft)?,
                hard_bytes: size("hard", &fs.hard)?,
                soft_files: fs.files_soft,
                hard_files: fs.files_hard,
                grace_secs: fs
                    .grace
                    .as_deref()
                    .map(parse_duration)
                    .transpose()
                    .map_err(|e| format!("{}: {e}", at("grace")))?
                    .map(|d| d.as_secs()),
            };
            limit
                .validate()
                .map_err(|e| format!("[quotas.{name}]: {e}"))?;
            let layout = fs.layout.unwrap_or_else(|| "{user}".to_string());
            if !layout.contains("{user}") || layout.starts_with('/') || layout.contains("..") {
                return Err(format!(
                    "{} {layout:?}: a relative path holding {{user}}, e.g. \"{{user}}\"",
                    at("layout")
                ));
            }
            out.push(QuotaFs {
                name: name.to_string(),
                root: fs.root.unwrap_or_else(|| self.shared_root().join(name)),
                layout,
                default_limit: limit,
            });
        }
        Ok(out)
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
            schedule: default_snapshot_schedule(),
            exclude: Vec::new(),
            one_file_system: true,
        };
        vec![source("datasets", root.clone()), source("home", home)]
    }

    /// The retention policy applied after each scheduled backup.
    pub fn snapshot_policy(&self) -> labpool_snapshots::Policy {
        let s = &self.snapshots;
        labpool_snapshots::Policy {
            keep_last: s.keep_last,
            keep_daily: s.keep_daily,
            keep_weekly: s.keep_weekly,
            keep_monthly: s.keep_monthly,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "[controller]\nstate_dir = \"state\"\nsocket = \"/run/labpool.sock\"\n";

    #[test]
    fn minimal_file_gets_defaults_and_absolute_paths() {
        let c = Config::parse(MINIMAL, Path::new("/srv/lp/labpool.toml")).unwrap();
        assert_eq!(c.controller.state_dir, Path::new("/srv/lp/state"));
        assert_eq!(c.controller.socket, Path::new("/run/labpool.sock"));
        assert_eq!(c.spool_dir(), Path::new("/srv/lp/state/spool"));
        assert_eq!(c.controller.kill_grace, Duration::from_secs(30));
        assert_eq!(c.partitions.iter().filter(|p| p.default).count(), 1);
    }

    #[test]
    fn typo_names_line_and_key() {
        let text = format!("{MINIMAL}kill_grase = \"5s\"\n");
        let e = Config::parse(&text, Path::new("/x/labpool.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 4") && e.contains("kill_grase"), "{e}");
    }

    #[test]
    fn bad_values_are_explained() {
        let text = format!("{MINIMAL}kill_grace = \"soon\"\n");
        let e = Config::parse(&text, Path::new("/x/labpool.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid duration 'soon'"), "{e}");
        let text = format!("{MINIMAL}[node]\nvirtual_gpus = \"four\"\n");
        let e = Config::parse(&text, Path::new("/x/labpool.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 5") && e.contains("4:rtx4090"), "{e}");
        let text = format!(
            "{MINIMAL}[[partition]]\nname = \"a\"\ndefault_time = \"1:00:00\"\nmax_time = \"2:00:00\"\n"
        );
        let e = Config::parse(&text, Path::new("/x/labpool.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("0 partitions are marked default"), "{e}");
    }

    #[test]
    fn snapshot_sources_default_to_datasets_and_home_and_are_checked() {
        let c = Config::parse(MINIMAL, Path::new("/srv/lp/labpool.toml")).unwrap();
        let names: Vec<_> = c
            .snapshot_sources()
            .into_iter()
            .map(|s| (s.name, s.path))
            .collect();
        assert_eq!(
            names,
            vec![
                ("datasets".to_string(), PathBuf::from("/shared/datasets")),
                ("home".to_string(), PathBuf::from("/shared/home"))
            ]
        );
        assert_eq!(c.snapshot_repo(), Path::new("/srv/lp/state/snapshots"));
        assert_eq!(c.snapshot_policy().keep_daily, 7);
        let src = |name: &str, schedule: &str| {
            format!(
                "{MINIMAL}[[snapshots.source]]\nname = \"{name}\"\npath = \"data\"\nschedule = \"{schedule}\"\n"
            )
        };
        let c = Config::parse(
            &src("lab", "15 2 * * 1-5"),
            Path::new("/srv/lp/labpool.toml"),
        )
        .unwrap();
        assert_eq!(c.snapshot_sources()[0].path, Path::new("/srv/lp/data"));
        assert!(c.snapshot_sources()[0].one_file_system);
        let e = Config::parse(&src("lab", "nightly"), Path::new("/x.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[[snapshots.source]] lab") && e.contains("0 3 * * *"),
            "{e}"
        );
        let e = Config::parse(&src("a b", "0 3 * * *"), Path::new("/x.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("use letters, digits"), "{e}");
        let twice = format!(
            "{}{}",
            src("x", "0 3 * * *"),
            src("x", "0 4 * * *").replace(MINIMAL, "")
        );
        let e = Config::parse(&twice, Path::new("/x.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("given twice"), "{e}");
    }

    #[test]
    fn dataset_and_cache_settings_are_checked() {
        let c = Config::parse(MINIMAL, Path::new("/srv/lp/labpool.toml")).unwrap();
        assert_eq!(c.datasets.root, Path::new("/shared/datasets"));
        assert_eq!(c.cache_dir(), Path::new("/srv/lp/state/cache"));
        assert_eq!(c.policy().placement.prefetch_horizon_s, Some(1800));
        let text = format!(
            "{MINIMAL}[datasets]\nroot = \"data\"\n[cache]\ndir = \"ssd\"\ncapacity = \"500G\"\nbandwidth = \"200M\"\nprefetch_horizon = \"0s\"\n"
        );
        let c = Config::parse(&text, Path::new("/srv/lp/labpool.toml")).unwrap();
        assert_eq!(c.datasets.root, Path::new("/srv/lp/data"));
        assert_eq!(c.cache_dir(), Path::new("/srv/lp/ssd"));
        assert_eq!(c.cache.capacity, Some(500_000_000_000));
        assert_eq!(c.cache.bandwidth, Some(200_000_000));
        assert_eq!(c.policy().placement.prefetch_horizon_s, None);
        let bad = |extra: &str| {
            Config::parse(&format!("{MINIMAL}{extra}"), Path::new("/x/labpool.toml"))
                .unwrap_err()
                .to_string()
        };
        let e = bad("[cache]\nhigh_watermark = 0.5\nlow_watermark = 0.7\n");
        assert!(
            e.contains("low_watermark (0.7) <= high_watermark (0.5)"),
            "{e}"
        );
        let e = bad("[cache]\ncapacity = \"lots\"\n");
        assert!(
            e.contains("invalid size 'lots'") && e.contains("500G"),
            "{e}"
        );
        let e = bad("[cache]\nworkers = 0\n");
        assert!(e.contains("at least 1"), "{e}");
    }

    #[test]
    fn virtual_gpu_forms() {
        assert_eq!(
            VirtualGpus::parse("4:RTX4090").unwrap(),
            VirtualGpus {
                count: 4,
                gpu_type: "rtx4090".into()
            }
        );
        assert_eq!(VirtualGpus::parse("2").unwrap().gpu_type, "virtual");
        assert!(VirtualGpus::parse("0").is_err());
        assert!(VirtualGpus::parse("2:").is_err());
    }
}
