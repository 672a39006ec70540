//! `labpool init --dir DIR`: a commented config that works on this machine as it is.

use crate::args::InitArgs;
use crate::discovery::{host_cpus, host_mem_mib, host_name, nvml_gpus, nvml_library};
use crate::settings::{Config, VirtualGpus};
use anyhow::Context;
use labpool_scheduler::node::GpuDevice;
use labpool_units::{format_mib, format_mib_exact};
use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Choices for a new config.
#[derive(Clone)]
pub struct NewConfig {
    /// Directory for state, socket and log.
    pub dir: PathBuf,
    /// Directory for `labpool.toml` and `cluster.key` (DIR itself, unless the packaged layout).
    pub config_dir: PathBuf,
    /// Node name.
    pub node_name: String,
    /// Cores.
    pub cpus: u32,
    /// Memory, MiB.
    pub mem_mib: u64,
    /// Virtual GPUs to switch on.
    pub virtual_gpus: Option<VirtualGpus>,
    /// What NVML said: the GPUs, or why there are none.
    pub nvml: Result<Vec<GpuDevice>, String>,
    /// TERM-to-KILL grace.
    pub kill_grace: &'static str,
    /// Where `datasets`, `home` and `scratch` go [default: DIR/shared].
    pub shared_root: Option<PathBuf>,
    /// Members' homes, for the home snapshot source and quota [default: SHARED/home].
    pub home_root: Option<PathBuf>,
    /// The address agents join at, when given.
    pub listen: Option<String>,
}

impl NewConfig {
    /// The config text.
    pub fn render(&self) -> String {
        let path = |name: &str| quote(&self.dir.join(name).display().to_string());
        let shared_root = self
            .shared_root
            .clone()
            .unwrap_or_else(|| self.dir.join("shared"));
        let shared = |name: &str| quote(&shared_root.join(name).display().to_string());
        let gpu_section = match (&self.virtual_gpus, &self.nvml) {
            (Some(v), _) => format!(
                "# GPUs: virtual ones are switched on ({} of type {}); a job sees their numbers in\n\
                 # CUDA_VISIBLE_DEVICES as it would real ones. Remove this line to use NVML.\n\
                 virtual_gpus = \"{}:{}{}\"",
                v.count,
                v.gpu_type,
                v.count,
                v.gpu_type,
                if v.memory_mib > 0 {
                    format!(":{}M", v.memory_mib)
                } else {
                    String::new()
                }
            ),
            (None, Ok(gpus)) if !gpus.is_empty() => format!(
                "# GPUs: NVML found {}; they are discovered again at every start.\n\
                 # To try labpool without the driver, virtual GPUs can stand in:\n\
                 # virtual_gpus = \"4:rtx4090\"",
                describe_gpus(gpus)
            ),
            (None, Ok(_)) => "# GPUs: NVML found none on this machine.\n\
                 # To try labpool without GPUs, switch on virtual ones:\n\
                 # virtual_gpus = \"4:rtx4090\""
                .to_string(),
            (None, Err(why)) => format!(
                "# GPUs: none found on this machine ({why}).\n\
                 # To try labpool without GPUs, switch on virtual ones:\n\
                 # virtual_gpus = \"4:rtx4090\""
            ),
        };
        format!(
            r#"# labpool configuration, written by `labpool init`.
# Every key is described in labpool's book: docs/reference/configuration.md.

[controller]
# State database (SQLite) and the job spool.
state_dir = {state}
# The CLI talks to the controller over this Unix socket.
socket = {socket}
# `labpool serve` logs here as well as to standard error.
log_file = {log}
# Members of this Unix group may act on every job; root always may.
admin_group = "labpool-admins"
# Time between TERM and KILL when a job is cancelled or reaches its time limit.
kill_grace = "{grace}"
# Node agents on other machines (labpool agent) join here, signing every request with
# cluster.key (beside this file; copy it to each node). Loopback unless you give the LAN
# address; without it this controller is one box.
{listen}
# node_timeout = "5m"        # a node silent this long goes DOWN and its jobs are requeued
# max_clock_skew = "5m"      # requests signed further off than this are refused
# local_node = true          # false: this machine only schedules, it runs no jobs

[node]
name = {name}
# CPU cores and memory the pool may hand out.
cpus = {cpus}
memory = "{mem}"
{gpu_section}
# Where NVML is loaded from, if not the system's libnvidia-ml.so.1:
# nvml_library = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
# GPU sharing: up to this many small jobs submitted with --gpu-share hold one GPU at once
# (a number for every GPU, or by type). Default 1: a GPU belongs to one job.
# gpu_share = {{ rtx3090 = 2 }}
# GPU slices: cards members may take a part of, each part with its share of the card's memory
# (--gres=gpu:rtx4090.4:1 is a quarter, --gres=shard:N counts the smallest part); a card type
# is either shared above or sliced here.
# slices = {{ rtx4090 = [2, 4] }}
# Features jobs may ask for with --constraint (sbatch -C), e.g. the GPU model and the network:
# features = ["a100", "ib"]
# cuda_checkpoint = "/usr/local/bin/cuda-checkpoint"   # default: on PATH; suspends idle sessions

# What every job gets: labpool sets CUDA_VISIBLE_DEVICES to the job's GPUs, refuses scripts
# that override it ("warn" only warns), puts each job in cgroups where the kernel has them
# (its own GPU device nodes only; --mem is a hard memory limit), and sets GPU memory growth on.
[jobs]
cuda_visible_devices = "refuse"
isolation = "auto"
# device_filter = "auto"   # cgroup-v1 (devices.deny) or bpf (cgroup v2); auto: v1 where mounted
# gpu_env = {{ TF_GPU_ALLOCATOR = "" }}   # change or drop ("") a default variable
# interactive_idle = "1h"   # a session with no input and its GPUs quiet this long is told,
# idle_gpu_percent = 5      # (a GPU at or over this utilisation is computing: not idle)
# idle_grace = "10m"        # then stopped this long after; [[partition]] may set its own
# suspend_idle = true       # a one-GPU session is suspended instead, where cuda-checkpoint runs
# ports = "20000-29999"     # leased to jobs: MASTER_PORT, the step launcher, one per task

# Software environments (labpool env create NAME --file requirements.txt; submit --env NAME).
# Builds live at the same path on every node (Python environments are not relocatable);
# packed copies in `archive` are unpacked on nodes that lack them.
[envs]
store = {envs}
archive = {env_archives}
# python = "/usr/bin/python3"   # the Python venvs are built with
build_timeout = "30m"

# Partitions (queues). A job without --partition goes to the default one; a job asking for
# more time than max_time is refused at submit. Higher priority is considered first.
[[partition]]
name = "high"                # deadline work: an admin grants it by adding people to the
priority = 100               # "deadline" account (labpool account add deadline;
default_time = "1-00:00:00"  # labpool account add-user deadline alice)
max_time = "3-00:00:00"
allow_accounts = ["deadline"]

[[partition]]
name = "normal"
default = true
priority = 10
default_time = "1-00:00:00"
max_time = "7-00:00:00"

[[partition]]
name = "debug"               # short and small: for trying code
priority = 50
default_time = "30:00"
max_time = "1:00:00"
max_gpus_per_job = 1

[[partition]]
name = "interactive"
priority = 30
default_time = "1:00:00"
max_time = "4:00:00"

# Datasets: an admin registers directories under this root (labpool dataset add NAME PATH);
# jobs that declare them (--dataset NAME) get a verified copy on their node's local disk.
# Every day the audit checks that members can write nothing under it (labpool dataset audit).
[datasets]
root = {datasets}
audit_schedule = "0 5 * * *"

# The node's dataset cache: a local SSD directory. Each version of a dataset is kept apart, so
# a running job never sees its files change; versions no job needs are removed, furthest next
# use first, when the cache passes high_watermark of capacity.
[cache]
dir = {cache}
# capacity = "500G"          # default: 90% of the cache's file system
high_watermark = 0.9
low_watermark = 0.8
workers = 4                  # files copied at once; fewer spare the file server
# bandwidth = "200M"         # bytes per second read while staging; default: no limit
prefetch_horizon = "30m"     # stage data for jobs predicted to start this soon
locality_wait = "30m"        # longest a job waits for a node that holds its data rather than copy it
stage_in_wait = "7d"         # longest a job waits, GPUs not taken, while its data is copied in

# Snapshots: nightly deduplicated backups of shared data. Members find and restore their own
# files (labpool snapshot find PATH; labpool snapshot restore PATH --at yesterday). Put the
# repository on another disk than the data it protects.
[snapshots]
repo = {snapshots}
keep_daily = 7
keep_weekly = 4
keep_monthly = 6

[[snapshots.source]]
name = "datasets"
path = {datasets}
schedule = "0 3 * * *"       # crontab syntax, local time

[[snapshots.source]]
name = "home"
path = {home}
schedule = "30 3 * * *"
exclude = ["**/.cache", "**/__pycache__"]

# Quotas: each user's directory in home and scratch, and the limits for users an admin has
# not given their own (labpool quota set alice --home 50G --scratch 2T). Usage is scanned on
# the schedule; members see theirs with `labpool quota`. Over a hard limit, or over a soft one
# past its grace, new jobs are refused at submit; running jobs are never stopped.
[quotas]
scan_schedule = "0 * * * *"  # hourly

[quotas.home]
root = {home}
layout = "{{user}}"
# soft = "40G"
# hard = "50G"
# grace = "7d"

[quotas.scratch]
root = {scratch}
layout = "{{user}}"
# hard = "2T"

# Scratch purge: files untouched (atime, mtime and ctime) for max_age are deleted; their owners
# get a notice in ~/.labpool/purge-notice.txt warn_days before. A directory holding a file named
# .labpool-keep is never purged, nor the working directory of a running job.
[purge]
schedule = "0 4 * * *"
max_age = "30d"
warn_days = 7

# Alerts: a hot GPU, a lost node, a full disk, a zombie job, ECC errors, clock skew. They are
# listed by `labpool alerts` and POSTed to the webhook (with purge notices and audit findings),
# in the shape of the chat bot named by webhook_format: generic, wecom, dingtalk, feishu, slack.
# [alerts]
# webhook = "http://127.0.0.1:9000/labpool"
# webhook_format = "generic"
# gpu_temp_celsius = 85
# gpu_temp_for = "2m"
# node_lost_after = "5m"
# disk_percent = 90

# Mail: --mail-type notices (and the warnings before a job is killed at its time or memory
# limit) are e-mailed through an SMTP relay, such as this host's own postfix. Without smtp no
# e-mail is sent: notices go to the webhook above (or the controller's log), and sbatch warns.
# [mail]
# smtp = "127.0.0.1:25"
# from = "labpool@gpu1.lab.example"
# domain = "lab.example"      # a login name is mailed at NAME@domain
# warn_time_percent = 90
# warn_memory_percent = 90

# GPU metrics: every node samples its GPUs through NVML; the controller serves the whole pool
# at http://LISTEN/metrics under dcgm-exporter's names, for Prometheus and Grafana.
[metrics]
listen = "127.0.0.1:9400"    # "off" switches it off
# sample_interval = "5s"
# per_member = false         # true also serves each member's credits and quota use: /metrics has
#                            # no login, so only where the admins' Prometheus alone reaches it

# The web dashboard: `labpool web` prints a one-time URL that logs your browser in. Plain HTTP
# on loopback; from another machine, forward the port with ssh -L.
[web]
listen = "127.0.0.1:9402"    # "off" switches it off
# login_token_lifetime = "2m"
# session_lifetime = "12h"

# Zombie jobs hold GPUs and do not use them: their member is told, then the admins; set
# cancel_after to cancel them too.
# [zombies]
# low_util_percent = 5
# low_util_for = "7d"
# no_process_for = "1h"
# tell_admins_after = "1d"
# cancel_after = "off"

# Credits: everyone gets the same grant each month; a job costs GPU-hours x its GPU type's
# weight. A user whose credit is spent still runs on idle GPUs, and gives them back (is
# preempted) when someone in credit needs them. Emergency tokens (submit --emergency) put a
# job first in line, taking GPUs from preemptible jobs.
[credits]
monthly_grant = 1000
default_weight = 1.0
# gpu_weights = {{ a100 = 2.0, rtx4090 = 1.0, t4 = 0.5 }}
emergency_tokens = 2
emergency_max_gpus = 2
emergency_max_time = "1-00:00:00"
preemptible_rate = 0.5       # a --preemptible job pays this share of the charge

# Preemption: jobs of overdrawn members, --preemptible jobs, and jobs beyond their account's
# GrpTRES share (when the account may borrow: qos set ACCOUNT BorrowLimit=gres/gpu=N) are
# given a notice (their --signal, or TERM, and the file in $LABPOOL_PREEMPT_NOTICE), stopped
# after the grace, and requeued. Never within their first min_runtime.
[preemption]
grace = "2m"
min_runtime = "10m"

# Priority within a tier: a weighted sum of age, fair-share (recent use, decaying with the
# half-life) and partition priority, as in Slurm's multifactor plugin.
[priority]
weight_age = 1000
weight_fairshare = 10000
weight_partition = 5000
max_age = "7days"
fairshare_half_life = "7days"
"#,
            state = path("state"),
            socket = path("labpool.sock"),
            log = path("labpool.log"),
            datasets = shared("datasets"),
            cache = path("cache"),
            snapshots = path("backup/snapshots"),
            home = match &self.home_root {
                Some(h) => quote(&h.display().to_string()),
                None => shared("home"),
            },
            scratch = shared("scratch"),
            envs = path("envs"),
            env_archives = shared("envs"),
            grace = self.kill_grace,
            listen = match &self.listen {
                Some(l) => format!("listen = {}", quote(l)),
                None => "# listen = \"127.0.0.1:7070\"".to_string(),
            },
            name = quote(&self.node_name),
            cpus = self.cpus,
            mem = format_mib_exact(self.mem_mib),
        )
    }

    /// Writes `DIR/labpool.toml` (and creates DIR), then loads it back to be sure it works.
    pub fn write(&self, force: bool) -> anyhow::Result<Config> {
        self.write_text(&self.render(), force)
    }

    /// Writes `text` (this config, rendered and perhaps changed) as [`NewConfig::write`] does.
    pub fn write_text(&self, text: &str, force: bool) -> anyhow::Result<Config> {
        let path = self.config_dir.join("labpool.toml");
        let text = text.to_string();
        // Check the text before anything is made, so that a bad --dir or --name leaves nothing
        // half-made behind.
        Config::parse(&text, &path)?;
        create_dirs(&[&self.dir, &self.config_dir])?;
        if path.exists() && !force {
            anyhow::bail!(
                "{} already exists\nhint: pass --force to overwrite it",
                path.display()
            );
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        let config = Config::load(&path)?;
        let fs = config.quota_filesystems().map_err(anyhow::Error::msg)?;
        // Scratch is open to all, sticky, as /tmp is: members make their own directories in it.
        for (what, dir, mode) in [
            ("datasets root", config.datasets.root.clone(), 0o755),
            ("home root", fs[0].root.clone(), 0o755),
            ("scratch root", fs[1].root.clone(), 0o1777),
        ] {
            let existed = dir.exists();
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(&dir)
                .with_context(|| format!("cannot create the {what} {}", dir.display()))?;
            if !existed {
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))
                    .with_context(|| format!("cannot set the mode of {}", dir.display()))?;
            }
        }
        // The pool's shared secret, for the nodes that will join it: made once, kept on --force.
        let key = self.config_dir.join("cluster.key");
        if !key.exists() {
            labpool_cluster::ClusterKey::generate()
                .context("cannot read random bytes for the cluster key")?
                .write_new(&key)?;
        }
        Ok(config)
    }
}

/// A TOML string literal, escaped.
pub(crate) fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn describe_gpus(gpus: &[GpuDevice]) -> String {
    let mut by_type: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    for g in gpus {
        *by_type.entry((&g.gpu_type, &g.product)).or_default() += 1;
    }
    by_type
        .iter()
        .map(|((t, p), n)| format!("{n}x {t} ({p})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where `labpool init` puts things.
pub(crate) struct Layout {
    /// State, socket, log, cache (`--dir`).
    pub dir: PathBuf,
    /// `labpool.toml` and `cluster.key`.
    pub config_dir: PathBuf,
}

/// The state directory of the packaged layout (without `--dir`); its config is
/// [`crate::settings::DEFAULT_CONFIG_PATH`], so nobody needs `LABPOOL_CONFIG`.
pub const PACKAGED_STATE_DIR: &str = "/var/lib/labpool";

/// `--virtual-gpus` checked, and the layout: everything in `--dir` (made absolute), or without
/// it the packaged layout. For a controller's config and an agent's.
pub(crate) fn gpus_and_layout(args: &InitArgs) -> anyhow::Result<(Option<VirtualGpus>, Layout)> {
    let gpus = args
        .virtual_gpus
        .as_deref()
        .map(VirtualGpus::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let layout = match &args.dir {
        Some(dir) => {
            let dir = std::path::absolute(dir)
                .with_context(|| format!("bad directory {}", dir.display()))?;
            Layout {
                config_dir: dir.clone(),
                dir,
            }
        }
        None => Layout {
            dir: PathBuf::from(PACKAGED_STATE_DIR),
            config_dir: Path::new(crate::settings::DEFAULT_CONFIG_PATH)
                .parent()
                .unwrap_or(Path::new("/etc"))
                .to_path_buf(),
        },
    };
    Ok((gpus, layout))
}

/// Creates the layout's directories (mode 0755), saying what to do when it may not.
pub(crate) fn create_dirs(dirs: &[&Path]) -> anyhow::Result<()> {
    for dir in dirs {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .with_context(|| {
                format!(
                    "cannot create {}\nhint: run it as root (sudo), or pass --dir DIR to keep everything in one directory of yours",
                    dir.display()
                )
            })?;
    }
    Ok(())
}

/// What members set to find this config: nothing when it is the default one.
pub(crate) fn config_hint(config: &Path) -> String {
    if config == Path::new(crate::settings::DEFAULT_CONFIG_PATH) {
        format!(
            "members need no LABPOOL_CONFIG: {} is the default",
            config.display()
        )
    } else {
        format!("export LABPOOL_CONFIG={}", config.display())
    }
}

/// Runs `labpool init`.
pub fn run(args: &InitArgs) -> anyhow::Result<()> {
    if let Some(join) = &args.join {
        return crate::commands::init_agent::run(args, join);
    }
    let (virtual_gpus, layout) = gpus_and_layout(args)?;
    // The homes members use: named, or found from the user database, unless a shared root
    // was given for everything.
    let home: Option<(PathBuf, String)> = match (&args.home_root, &args.shared_root) {
        (Some(h), _) => {
            let h = std::path::absolute(h).context("bad --home-root")?;
            Some((h, "as --home-root says".to_string()))
        }
        (None, Some(_)) => None,
        (None, None) => crate::homes::on_this_machine().map(|g| {
            let shown: Vec<&str> = g.users.iter().take(5).map(String::as_str).collect();
            let more = g.users.len().saturating_sub(shown.len());
            let why = format!(
                "where the homes of {}{} are; --home-root PATH to choose another",
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
            (g.root, why)
        }),
    };
    let new = NewConfig {
        node_name: args.name.clone().unwrap_or_else(host_name),
        cpus: host_cpus(),
        mem_mib: host_mem_mib(),
        virtual_gpus,
        nvml: nvml_gpus(nvml_library(None).as_deref()),
        kill_grace: "30s",
        shared_root: args
            .shared_root
            .as_deref()
            .map(std::path::absolute)
            .transpose()
            .context("bad --shared-root")?,
        home_root: home.as_ref().map(|(root, _)| root.clone()),
        listen: args.listen.clone(),
        dir: layout.dir,
        config_dir: layout.config_dir,
    };
    let config = match args.executor.as_deref() {
        Some("slurm") => crate::commands::init_slurm::write(&new, args)?,
        _ => new.write(args.force)?,
    };
    crate::out!("Wrote {}", config.path.display());
    crate::out!(
        "  node   {}: {} cores, {} memory",
        new.node_name,
        new.cpus,
        format_mib(new.mem_mib)
    );
    match (&new.virtual_gpus, &new.nvml) {
        (Some(v), _) => crate::out!(
            "  GPUs   {} virtual GPUs of type {} are switched on",
            v.count,
            v.gpu_type
        ),
        (None, Ok(g)) if !g.is_empty() => crate::out!("  GPUs   NVML found {}", describe_gpus(g)),
        (None, Ok(_)) => crate::out!(
            "  GPUs   none found: NVML reports 0 GPUs; virtual GPUs are in the file, commented out (or pass --virtual-gpus 4:rtx4090)"
        ),
        (None, Err(why)) => crate::out!(
            "  GPUs   none found on this machine ({why}); virtual GPUs are in the file, commented out (or pass --virtual-gpus 4:rtx4090)"
        ),
    }
    let socket = &config.controller.socket;
    if socket.as_os_str().len() > 100 {
        crate::out!(
            "  warning: the socket path {} is longer than Unix sockets allow (108 bytes); use a shorter --dir",
            socket.display()
        );
    }
    crate::out!(
        "  data   datasets under {}, cached on this node in {}",
        config.datasets.root.display(),
        config.cache_dir().display()
    );
    match &home {
        Some((root, why)) => crate::out!(
            "  homes  {} ({why}): backed up nightly and under the home quota",
            root.display()
        ),
        None if args.shared_root.is_none() => crate::out!(
            "  homes  no user's home was found in /etc/passwd, so homes are taken to be under the shared root; if members' homes are elsewhere, run init again with --home-root PATH"
        ),
        None => {}
    }
    if let Ok(fs) = config.quota_filesystems() {
        crate::out!(
            "  quota  home {}, scratch {} (purged after {} untouched)",
            fs[0].root.display(),
            fs[1].root.display(),
            labpool_units::format_duration(config.purge.max_age)
        );
    }
    use crate::commands::init_systemd::{Daemon, when_asked};
    when_asked(args, Daemon::Controller, &config.path)?;
    crate::out!("Next:");
    crate::out!("  labpool serve --config {}", config.path.display());
    crate::out!("  {}", config_hint(&config.path));
    crate::out!("  labpool submit --gpus 1 --wrap 'echo $CUDA_VISIBLE_DEVICES'");
    Ok(())
}

/// The directory a config lives in.
pub fn config_dir(config: &Config) -> &Path {
    config.path.parent().unwrap_or(Path::new("/"))
}
