//! `labpool init --dir DIR --join HOST:PORT --key FILE --name NODE`: the config of a node that
//! joins a controller on another machine (`labpool agent`).

use crate::args::InitArgs;
use crate::commands::init::quote;
use crate::discovery::{host_cpus, host_mem_mib, host_name};
use crate::settings::{Config, VirtualGpus};
use anyhow::Context;
use labpool_units::format_mib_exact;
use std::path::Path;

/// The agent config's text.
pub fn render(
    dir: &Path,
    key: &Path,
    join: &str,
    listen: &str,
    name: &str,
    gpus: Option<&VirtualGpus>,
) -> String {
    let path = |f: &str| quote(&dir.join(f).display().to_string());
    let gpu_line = match gpus {
        // The memory too: a sliced card's slices take their share of it.
        Some(v) if v.memory_mib > 0 => format!(
            "virtual_gpus = \"{}:{}:{}M\"",
            v.count, v.gpu_type, v.memory_mib
        ),
        Some(v) => format!("virtual_gpus = \"{}:{}\"", v.count, v.gpu_type),
        None => "# virtual_gpus = \"4:rtx4090\"   # without it, NVML finds the GPUs".to_string(),
    };
    format!(
        r#"# labpool node agent configuration, written by `labpool init --join`.
# Run it with: labpool agent --config THIS_FILE (as root, so jobs run as their owners).

[controller]
# This agent's own state (its job spool) and the socket this node's CLI talks to: the agent
# forwards every CLI request to the controller, vouching for the caller's uid.
state_dir = {state}
socket = {socket}
log_file = {log}
kill_grace = "30s"

[agent]
# The controller's `listen` address, and the copy of its cluster key (mode 0600).
join = {join}
key = {key}
# Where the controller sends orders and other nodes fetch staged datasets from this one.
listen = {listen}
# advertise = "10.0.0.12:7071"   # the address others reach this agent at, if not `listen`
#                                # (or, listening on 0.0.0.0, the one its connections come from)
heartbeat = "10s"

[node]
name = {name}
cpus = {cpus}
memory = "{mem}"
{gpu_line}
# Features jobs may ask for with --constraint (sbatch -C):
# features = ["a100", "ib"]

# The node's dataset cache: a local SSD directory.
[cache]
dir = {cache}

# This node's GPUs at http://LISTEN/metrics under dcgm-exporter's names ("off": none); the
# controller's page has the whole pool. Port 9401, so that an agent beside its controller (9400)
# or beside a dcgm-exporter (9400) does not clash.
[metrics]
listen = "127.0.0.1:9401"
# sample_interval = "5s"
"#,
        state = path("state"),
        socket = path("labpool.sock"),
        log = path("agent.log"),
        join = quote(join),
        key = quote(&key.display().to_string()),
        listen = quote(listen),
        name = quote(name),
        cpus = host_cpus(),
        mem = format_mib_exact(host_mem_mib()),
        cache = path("cache"),
    )
}

/// Writes an agent's `labpool.toml` and copies the cluster key beside it (in DIR, or in the
/// packaged layout `/etc/labpool`).
pub fn run(args: &InitArgs, join: &str) -> anyhow::Result<()> {
    let key_src = args.key.as_deref().context("--join needs --key FILE")?;
    if !join.contains(':') {
        anyhow::bail!(
            "--join {join:?}: give the controller's listen address as HOST:PORT, e.g. 10.0.0.1:7070"
        );
    }
    let (gpus, layout) = crate::commands::init::gpus_and_layout(args)?;
    let dir = layout.dir;
    let name = args.name.clone().unwrap_or_else(host_name);
    let listen = args.listen.clone().unwrap_or_else(|| "0.0.0.0:7071".into());
    let key_dst = layout.config_dir.join("cluster.key");
    let text = render(&dir, &key_dst, join, &listen, &name, gpus.as_ref());
    let path = layout.config_dir.join("labpool.toml");
    // Everything is checked before anything is made.
    Config::parse(&text, &path)?;
    let key_text = std::fs::read_to_string(key_src)
        .with_context(|| format!("cannot read the cluster key {}", key_src.display()))?;
    let key = labpool_cluster::ClusterKey::from_hex(&key_text).with_context(|| {
        format!(
            "{} is not a cluster key (64 hex digits); copy the controller's DIR/cluster.key",
            key_src.display()
        )
    })?;
    crate::commands::init::create_dirs(&[&dir, &layout.config_dir])?;
    if path.exists() && !args.force {
        anyhow::bail!(
            "{} already exists\nhint: pass --force to overwrite it",
            path.display()
        );
    }
    let same = std::fs::canonicalize(key_src).ok() == std::fs::canonicalize(&key_dst).ok();
    if !same {
        let _ = std::fs::remove_file(&key_dst);
        key.write_new(&key_dst)?;
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    let config = Config::load(&path)?;
    crate::out!("Wrote {} (node agent)", config.path.display());
    crate::out!("  node   {name} joins the controller at {join}");
    crate::out!("  key    {} (mode 0600)", key_dst.display());
    use crate::commands::init_systemd::{Daemon, when_asked};
    when_asked(args, Daemon::Agent, &config.path)?;
    crate::out!("Next:");
    crate::out!("  labpool agent --config {}", config.path.display());
    crate::out!(
        "  on this node: {}",
        crate::commands::init::config_hint(&config.path)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_joining_nodes_virtual_gpus_keep_their_memory() {
        let gpus = VirtualGpus {
            count: 8,
            gpu_type: "a100".to_string(),
            memory_mib: 24576,
        };
        let dir = Path::new("/srv/labpool");
        let text = render(dir, Path::new("/k"), "h:7070", "h:0", "gn1", Some(&gpus));
        assert!(text.contains("virtual_gpus = \"8:a100:24576M\""), "{text}");
        let config: Config = toml::from_str(&text).unwrap();
        assert_eq!(config.node.virtual_gpus.unwrap().memory_mib, 24576);
    }
}
