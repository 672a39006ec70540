//! `labpool init --dir DIR --executor slurm`: a controller in front of the lab's Slurm. It reads
//! Slurm's nodes and partitions (`scontrol show node|partition -o`), keeps Slurm's partition
//! names, limits and node lists, switches off the controller's own node (jobs run in Slurm),
//! takes agents (optional, at most one per Slurm node, caching only), and writes `[executor] kind = "slurm"` with
//! where Slurm's commands and config are.

use crate::args::InitArgs;
use crate::commands::init::NewConfig;
use crate::settings::Config;
use crate::slurm_gate::node::NodeLine;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One partition as `scontrol show partition -o` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmPartition {
    /// `PartitionName`.
    pub name: String,
    /// `Default=YES`.
    pub default: bool,
    /// `PriorityTier`.
    pub priority: u32,
    /// `Nodes`, expanded; empty for `ALL`.
    pub nodes: Vec<String>,
    /// `DefaultTime` (`NONE`: the max time).
    pub default_time: String,
    /// `MaxTime`.
    pub max_time: String,
}

/// The value of `key=` in a `-o` line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ')
        .find_map(|f| f.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

impl SlurmPartition {
    /// Reads one line; None for a line that names no partition.
    pub fn parse(line: &str) -> Option<SlurmPartition> {
        let nodes = field(line, "Nodes").unwrap_or("ALL");
        let max_time = field(line, "MaxTime").unwrap_or("UNLIMITED").to_string();
        let default_time = match field(line, "DefaultTime") {
            Some("NONE") | None => max_time.clone(),
            Some(t) => t.to_string(),
        };
        Some(SlurmPartition {
            name: field(line, "PartitionName")?.to_string(),
            default: field(line, "Default") == Some("YES"),
            priority: field(line, "PriorityTier")
                .and_then(|p| p.parse().ok())
                .unwrap_or(1),
            nodes: if nodes == "ALL" {
                Vec::new()
            } else {
                labpool_scheduler::hostlist::expand(nodes).unwrap_or_default()
            },
            default_time,
            max_time,
        })
    }

    /// Its `[[partition]]` table.
    pub fn render(&self) -> String {
        let mut t = format!("[[partition]]\nname = \"{}\"\n", self.name);
        if self.default {
            t.push_str("default = true\n");
        }
        t.push_str(&format!("priority = {}\n", self.priority));
        if !self.nodes.is_empty() {
            let list: Vec<String> = self.nodes.iter().map(|n| format!("\"{n}\"")).collect();
            t.push_str(&format!("nodes = [{}]\n", list.join(", ")));
        }
        t.push_str(&format!(
            "default_time = \"{}\"\nmax_time = \"{}\"\n",
            self.default_time, self.max_time
        ));
        t
    }
}

/// Runs `scontrol show WHAT -o` from `bin` with `conf`.
fn scontrol(bin: &Path, conf: Option<&Path>, what: &str) -> anyhow::Result<String> {
    let mut c = Command::new(bin.join("scontrol"));
    c.args(["show", what, "-o"]);
    if let Some(conf) = conf {
        c.env("SLURM_CONF", conf);
    }
    let out = c.output().with_context(|| {
        format!(
            "cannot run {}: is Slurm's client installed (slurm-client)?",
            bin.join("scontrol").display()
        )
    })?;
    if !out.status.success() {
        anyhow::bail!(
            "scontrol show {what} failed: {}\nhint: check that slurmctld runs and that SLURM_CONF (or --slurm-conf) names its slurm.conf",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The directory Slurm's commands are in: the one `scontrol` is found in on `PATH`.
fn slurm_bin() -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .find(|d| d.join("scontrol").is_file())
        .unwrap_or_else(|| PathBuf::from("/usr/bin"))
}

/// Writes the controller's config for `--executor slurm`, and prints what Slurm has.
pub fn write(new: &NewConfig, args: &InitArgs) -> anyhow::Result<Config> {
    let bin = slurm_bin();
    let conf = args
        .slurm_conf
        .clone()
        .or_else(|| std::env::var_os("SLURM_CONF").map(PathBuf::from))
        .map(|p| std::path::absolute(&p).unwrap_or(p));
    let nodes: Vec<NodeLine> = scontrol(&bin, conf.as_deref(), "node")?
        .lines()
        .filter_map(NodeLine::parse)
        .collect();
    let partitions: Vec<SlurmPartition> = scontrol(&bin, conf.as_deref(), "partition")?
        .lines()
        .filter_map(SlurmPartition::parse)
        .collect();
    if nodes.is_empty() || partitions.is_empty() {
        anyhow::bail!(
            "Slurm reports {} nodes and {} partitions: nothing to put in front of\nhint: check SLURM_CONF (or --slurm-conf)",
            nodes.len(),
            partitions.len()
        );
    }
    let mut new_listen = None;
    if new.listen.is_none() {
        new_listen = Some("0.0.0.0:7070".to_string());
    }
    let with_listen;
    let new = match new_listen {
        Some(l) => {
            with_listen = NewConfig {
                listen: Some(l),
                ..new.clone()
            };
            &with_listen
        }
        None => new,
    };
    let text = slurm_text(&new.render(), &partitions, &bin, conf.as_deref());
    let config = new.write_text(&text, args.force)?;
    crate::out!(
        "Slurm: {} nodes, {} partitions",
        nodes.len(),
        partitions.len()
    );
    for n in &nodes {
        crate::out!("  node {} ({}), features {}", n.name, n.state, n.features);
    }
    let names: Vec<&str> = partitions.iter().map(|p| p.name.as_str()).collect();
    crate::out!("  partitions {}", names.join(", "));
    crate::out!(
        "Every Slurm node takes jobs as Slurm describes it. Optionally, a labpool agent on a node caches its datasets (it runs no jobs):"
    );
    crate::out!(
        "  sudo labpool init --join THIS_HOST:{} --key {} --name NODE --systemd",
        new.listen
            .as_deref()
            .and_then(|l| l.rsplit(':').next())
            .unwrap_or("7070"),
        config_key(&config).display()
    );
    Ok(config)
}

fn config_key(config: &Config) -> PathBuf {
    config.cluster_key_path()
}

/// The rendered config made a Slurm gate's: Slurm's partitions instead of the defaults, no
/// jobs on the controller's own machine, and the `[executor]` section.
pub fn slurm_text(
    text: &str,
    partitions: &[SlurmPartition],
    bin: &Path,
    conf: Option<&Path>,
) -> String {
    let mut out = text.replace(
        "# local_node = true          # false: this machine only schedules, it runs no jobs",
        "local_node = false          # over Slurm, jobs run in Slurm, not on this machine",
    );
    if let (Some(start), Some(end)) = (
        out.find("# Partitions (queues)."),
        out.find("# Datasets: an admin"),
    ) {
        let mut block = String::from(
            "# Partitions: Slurm's own (scontrol show partition), with their limits and nodes.\n",
        );
        for p in partitions {
            block.push_str(&p.render());
            block.push('\n');
        }
        out.replace_range(start..end, &block);
    }
    out.push_str(&format!(
        "\n# Jobs run in the lab's Slurm: labpool places them, stages their data through the agent\n\
         # of the node it chose, then submits them there held, pinned and tagged, and releases them.\n\
         [executor]\nkind = \"slurm\"\nslurm_bin = \"{}\"\n{}poll = \"1s\"\nstart_timeout = \"30s\"\n",
        bin.display(),
        match conf {
            Some(c) => format!("slurm_conf = \"{}\"\n", c.display()),
            None => "# slurm_conf = \"/etc/slurm/slurm.conf\"\n".to_string(),
        }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_read_as_scontrol_writes_them() {
        let line = "PartitionName=debug AllowGroups=ALL Default=NO QoS=N/A DefaultTime=00:30:00 MaxNodes=UNLIMITED MaxTime=01:00:00 Nodes=gn[1-2] PriorityTier=50 State=UP";
        let p = SlurmPartition::parse(line).unwrap();
        assert_eq!(p.name, "debug");
        assert!(!p.default);
        assert_eq!(p.priority, 50);
        assert_eq!(p.nodes, ["gn1", "gn2"]);
        assert_eq!(
            (p.default_time.as_str(), p.max_time.as_str()),
            ("00:30:00", "01:00:00")
        );
        let all = SlurmPartition::parse("PartitionName=normal Default=YES DefaultTime=NONE MaxTime=UNLIMITED Nodes=ALL PriorityTier=1").unwrap();
        assert!(all.default && all.nodes.is_empty());
        assert_eq!(all.default_time, "UNLIMITED");
        assert!(all.render().contains("default = true\n"));
    }
}
