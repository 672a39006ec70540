//! `labpool sim`: replays a trace through the scheduler and lifecycle cores under several
//! policies; `labpool` is the policy `labpool serve` runs with the same config.

use crate::args::SimArgs;
use crate::settings::{Config, DEFAULT_CONFIG_PATH};
use anyhow::Context;
use labpool_sim::config::{ClusterSpec, parse_nodes};
use labpool_sim::report::{table, user_table};
use labpool_sim::sweep::{self, SweepCase};
use labpool_sim::trace::{TraceJob, parse_datasets, parse_trace};
use labpool_sim::{SimInput, SimPolicy, simulate};
use labpool_units::{parse_rate, parse_size};
use std::collections::BTreeMap;
use std::path::Path;

fn read_trace(
    trace: &Path,
    datasets: &Path,
) -> anyhow::Result<(Vec<TraceJob>, BTreeMap<String, u64>)> {
    let open = |path: &Path| {
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))
    };
    let jobs = parse_trace(open(trace)?).with_context(|| format!("in {}", trace.display()))?;
    let datasets =
        parse_datasets(open(datasets)?).with_context(|| format!("in {}", datasets.display()))?;
    Ok((jobs, datasets))
}

fn file_name(path: Option<&Path>) -> String {
    path.and_then(Path::file_name)
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// `labpool sim --sweep N`: the policies over N generated traces and the given one, one table
/// (or one JSON object per trace), with a bar while it runs.
fn sweep(
    args: &SimArgs,
    count: usize,
    policies: &[SimPolicy],
    daemon: &labpool_scheduler::policy::Policy,
    given: Option<SweepCase>,
) -> anyhow::Result<()> {
    let mut policies = policies.to_vec();
    // Every figure is against fifo: it goes first, whether asked for or not.
    policies.retain(|p| *p != SimPolicy::Fifo);
    policies.insert(0, SimPolicy::Fifo);
    let mut cases = sweep::generated_cases(count, args.sweep_jobs, daemon);
    cases.extend(given);
    let bar = indicatif::ProgressBar::new(cases.len() as u64).with_style(
        indicatif::ProgressStyle::with_template(
            "simulating {pos}/{len} traces [{bar:30}] eta {eta}",
        )
        .expect("a fixed template")
        .progress_chars("=> "),
    );
    let rows = sweep::run(&cases, &policies, |done| bar.set_position(done as u64))?;
    bar.finish_and_clear();
    if args.json {
        for r in &rows {
            crate::out!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    crate::out!(
        "{} traces ({} generated of {} jobs: 8x8:v100, 1 GbE shared storage, 10 GbE between nodes, cache 0.25x to 2x the working set)",
        rows.len(),
        count,
        args.sweep_jobs
    );
    crate::out!("{}", sweep::table(&rows));
    crate::out!("{}", sweep::bound_table(&rows));
    Ok(())
}

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
    let cluster = ClusterSpec {
        groups: parse_nodes(&args.nodes)?,
        ssd_bytes: parse_size(&args.ssd)?,
        shared_bw: parse_rate(&args.shared_bw)?,
        ssd_bw: parse_rate(&args.ssd_bw)?,
        nic_bw: parse_rate(&args.nic_bw)?,
    };
    let daemon = daemon_config(config)?.policy();
    // The trace given, as one run's input (under --sweep, one row of the sweep).
    let given = match (&args.trace, &args.datasets) {
        (Some(trace), Some(datasets)) => {
            let (jobs, datasets) = read_trace(trace, datasets)?;
            Some(SimInput {
                jobs,
                datasets,
                cluster,
                horizon_s: args.horizon,
                seed: args.seed,
                daemon: daemon.clone(),
                accounts: Default::default(),
            })
        }
        _ => None,
    };
    if let Some(count) = args.sweep {
        let given = given.map(|input| SweepCase {
            label: format!("{} (--ssd {})", file_name(args.trace.as_deref()), args.ssd),
            input,
        });
        return sweep(args, count, &policies, &daemon, given);
    }
    let input = given.expect("clap requires --trace and --datasets without --sweep");
    let mut reports = Vec::new();
    match args.accounts {
        Some(groups) => {
            // The same jobs and config, with caps, then with borrowing and preemption.
            let total = input.cluster.groups.iter().map(|g| g.count * g.gpus).sum();
            let mut input = input.clone();
            if let Some(away) = &args.away {
                let period = labpool_units::parse_duration(away)
                    .with_context(|| format!("--away {away}"))?;
                input.jobs = labpool_sim::accounts::rotate_absences(
                    &input.jobs,
                    groups,
                    period.as_secs_f64(),
                );
            }
            for (borrow, name) in [(false, "strict caps"), (true, "borrowing")] {
                let with = SimInput {
                    accounts: labpool_sim::accounts::equal_shares(
                        &input.jobs,
                        groups,
                        total,
                        borrow,
                        args.keep,
                    ),
                    ..input.clone()
                };
                let mut r = simulate(&with, SimPolicy::Labpool)?;
                r.policy = format!("labpool, {name}");
                reports.push(r);
            }
        }
        None => {
            for p in policies {
                reports.push(simulate(&input, p)?);
            }
        }
    }
    if args.placements {
        return placements(&reports, args.json);
    }
    if args.json {
        for r in &reports {
            crate::out!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    crate::out!(
        "{} jobs, nodes {}, SSD cache {} per node, shared storage {}, SSD {}, prefetch horizon {} s, seed {}",
        reports
            .first()
            .map_or(input.jobs.len(), |r| r.jobs + r.rejected),
        args.nodes,
        args.ssd,
        args.shared_bw,
        args.ssd_bw,
        args.horizon,
        args.seed
    );
    crate::out!("{}", table(&reports));
    crate::out!(
        "{}",
        labpool_sim::bound::lines(&reports, &labpool_sim::bound::bound(&input))
    );
    if args.users {
        for r in &reports {
            crate::out!("\n{}:\n{}", r.policy, user_table(r));
        }
    }
    Ok(())
}

/// `labpool sim --placements`: each job's node and times under each policy, then what the
/// caches copied and evicted; with `--json`, a line per job and a line of counts per policy.
fn placements(reports: &[labpool_sim::report::SimReport], json: bool) -> anyhow::Result<()> {
    for r in reports {
        let copies = &r.copies;
        if json {
            for p in &r.placements {
                let mut line = serde_json::to_value(p)?;
                line["policy"] = r.policy.clone().into();
                crate::out!("{line}");
            }
            let counts = serde_json::json!({
                "policy": r.policy,
                "copies_completed": copies.completed,
                "evictions": copies.evictions,
                "unfinished": r.unfinished,
            });
            crate::out!("{counts}");
            continue;
        }
        crate::out!("{}:", r.policy);
        crate::out!(
            "{:>6}  {:<12} {:>10} {:>10} {:>10}",
            "JOB",
            "NODE",
            "PLACED_S",
            "START_S",
            "END_S"
        );
        for p in &r.placements {
            crate::out!(
                "{:>6}  {:<12} {:>10.1} {:>10.1} {:>10.1}",
                p.job,
                p.node,
                p.placed_s,
                p.compute_s,
                p.end_s
            );
        }
        crate::out!(
            "copies completed {}, evictions {}, unfinished {}\n",
            copies.completed,
            copies.evictions,
            r.unfinished
        );
    }
    Ok(())
}
