//! `labpool sim`: replays a trace through the scheduler and lifecycle cores under several
//! policies; `labpool` is the policy `labpool serve` runs with the same config.

use crate::cli::SimArgs;
use crate::settings::{Config, DEFAULT_CONFIG_PATH};
use anyhow::Context;
use labpool_sim::config::{ClusterSpec, parse_nodes};
use labpool_sim::report::{table, user_table};
use labpool_sim::trace::{parse_datasets, parse_trace};
use labpool_sim::{SimInput, SimPolicy, simulate};
use labpool_units::{parse_rate, parse_size};
use std::path::Path;

/// The config whose policy `--policy labpool` replays: `--config` (or `LABPOOL_CONFIG`), else
/// the default path when it exists, else the built-in defaults `labpool init` also starts from.
fn daemon_config(explicit: Option<&Path>) -> anyhow::Result<Config> {
    let default = Path::new(DEFAULT_CONFIG_PATH);
    Ok(match explicit {
        Some(_) => Config::locate(explicit)?,
        None if default.exists() => Config::load(default)?,
        // Only the policy sections matter here; the controller's paths are placeholders.
        None => Config::parse(
            "[controller]\nstate_dir = \"/var/lib/labpool\"\nsocket = \"/run/labpool.sock\"\n",
            default,
        )?,
    })
}

/// Runs `labpool sim`.
pub fn run(args: &SimArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let policies = args
        .policy
        .split(',')
        .map(|p| {
            SimPolicy::parse(p).ok_or_else(|| {
                let known: Vec<&str> = SimPolicy::ALL.iter().map(|p| p.name()).collect();
                anyhow::anyhow!("unknown policy '{p}'; policies: {}", known.join(", "))
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let open = |path: &std::path::Path| {
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))
    };
    let jobs =
        parse_trace(open(&args.trace)?).with_context(|| format!("in {}", args.trace.display()))?;
    let datasets = parse_datasets(open(&args.datasets)?)
        .with_context(|| format!("in {}", args.datasets.display()))?;
    let cluster = ClusterSpec {
        groups: parse_nodes(&args.nodes)?,
        ssd_bytes: parse_size(&args.ssd)?,
        shared_bw: parse_rate(&args.shared_bw)?,
        ssd_bw: parse_rate(&args.ssd_bw)?,
    };
    let input = SimInput {
        jobs,
        datasets,
        cluster,
        horizon_s: args.horizon,
        seed: args.seed,
        daemon: daemon_config(config)?.policy(),
    };
    let mut reports = Vec::new();
    for p in policies {
        reports.push(simulate(&input, p)?);
    }
    if args.json {
        for r in &reports {
            crate::out!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    crate::out!(
        "{} jobs, nodes {}, SSD cache {} per node, shared storage {}, SSD {}, prefetch horizon {} s, seed {}",
        input.jobs.len(),
        args.nodes,
        args.ssd,
        args.shared_bw,
        args.ssd_bw,
        args.horizon,
        args.seed
    );
    crate::out!("{}", table(&reports));
    if args.users {
        for r in &reports {
            crate::out!("\n{}:\n{}", r.policy, user_table(r));
        }
    }
    Ok(())
}
