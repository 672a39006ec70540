//! `labpool dataset …` and `labpool cache …`.

use crate::api::data::{
    AddDatasetRequest, CacheStatus, DatasetDetail, DatasetView, RescanOutcome, StageQueued,
    StageRequest, VerifiedVersion, VerifyRequest, short,
};
use crate::args::{CacheCommand, DatasetCommand};
use crate::client::Client;
use crate::render::{or_dash, print, spinner, table};
use crate::settings::Config;
use indicatif::ProgressBar;
use std::time::{Duration, Instant};

/// How often `cache stage` asks for progress.
const POLL: Duration = Duration::from_millis(200);

/// A stage that neither progresses nor is queued for this long has stopped.
const GONE_AFTER: Duration = Duration::from_secs(3);

/// Runs `labpool dataset …`.
pub async fn dataset(command: &DatasetCommand, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    match command {
        DatasetCommand::Audit { fix, json } => {
            crate::commands::quotas::audit(&client, *fix, *json).await?
        }
        DatasetCommand::Add {
            name,
            path,
            description,
            json,
        } => {
            let path = std::path::absolute(path)?;
            let bar = spinner(format!("scanning {}", path.display()));
            let req = AddDatasetRequest {
                name: name.clone(),
                path,
                description: description.clone(),
            };
            let result: Result<DatasetView, _> = client.post("/v1/datasets", &req).await;
            bar.finish_and_clear();
            let d = result?;
            print(*json, &d, |d| {
                format!(
                    "registered {} ({}, {}) version {}\njobs declare it with --dataset {} and read it at ${}",
                    d.name,
                    labpool_units::count(d.files, "file"),
                    labpool_units::format_size(d.bytes),
                    short(&d.current),
                    d.name,
                    d.env_var
                )
            });
        }
        DatasetCommand::List(a) => {
            let all: Vec<DatasetView> = client.get("/v1/datasets").await?;
            print(a.json, &all, |all| {
                let rows = all
                    .iter()
                    .map(|d| {
                        vec![
                            d.name.clone(),
                            short(&d.current).to_string(),
                            d.files.to_string(),
                            labpool_units::format_size(d.bytes),
                            d.versions.to_string(),
                            d.path.display().to_string(),
                            d.description.clone(),
                        ]
                    })
                    .collect();
                table(
                    &[
                        "NAME",
                        "VERSION",
                        "FILES",
                        "SIZE",
                        "VERSIONS",
                        "SOURCE",
                        "DESCRIPTION",
                    ],
                    rows,
                )
            });
        }
        DatasetCommand::Show { name, json } => {
            let d: DatasetDetail = client.get(&format!("/v1/datasets/{name}")).await?;
            print(*json, &d, |d| {
                let v = &d.dataset;
                format!(
                    "name         {}\nsource       {}\ndescription  {}\nversion      {}\nfiles        {}\nsize         {}\nversions     {}\nregistered   {} by {}\njob variable ${}",
                    v.name,
                    v.path.display(),
                    if v.description.is_empty() {
                        "-"
                    } else {
                        &v.description
                    },
                    v.current,
                    v.files,
                    labpool_units::format_size(v.bytes),
                    v.versions,
                    crate::commands::jobs::moment(Some(&v.created)),
                    v.created_by,
                    v.env_var
                )
            });
        }
        DatasetCommand::Versions { name, json } => {
            let d: DatasetDetail = client.get(&format!("/v1/datasets/{name}")).await?;
            print(*json, &d.history, |h| {
                let rows = h
                    .iter()
                    .map(|v| {
                        vec![
                            format!("{}{}", short(&v.version), if v.current { " *" } else { "" }),
                            crate::commands::jobs::moment(Some(&v.created)),
                            v.files.to_string(),
                            labpool_units::format_size(v.bytes),
                            v.changed_files.to_string(),
                            labpool_units::format_size(v.changed_bytes),
                        ]
                    })
                    .collect();
                table(
                    &[
                        "VERSION (* current)",
                        "RECORDED",
                        "FILES",
                        "SIZE",
                        "CHANGED FILES",
                        "CHANGED",
                    ],
                    rows,
                )
            });
        }
        DatasetCommand::Rescan { name, json } => {
            let bar = spinner(format!("rescanning {name}"));
            let result: Result<RescanOutcome, _> = client
                .post(&format!("/v1/datasets/{name}/rescan"), &())
                .await;
            bar.finish_and_clear();
            let r = result?;
            print(*json, &r, |r| {
                if r.new_version {
                    format!(
                        "{}: new version {} ({} added, {} changed, {} removed; {} to copy to caches)\nrunning jobs keep their version; jobs placed from now on get this one",
                        r.dataset.name,
                        short(&r.dataset.current),
                        r.added,
                        r.changed,
                        r.removed,
                        labpool_units::format_size(r.changed_bytes)
                    )
                } else {
                    format!(
                        "{}: unchanged, still version {}",
                        r.dataset.name,
                        short(&r.dataset.current)
                    )
                }
            });
        }
    }
    Ok(())
}

/// Runs `labpool cache …`.
pub async fn cache(command: &CacheCommand, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    match command {
        CacheCommand::Status { node, json } => {
            let query = crate::api::data::CacheQuery { node: node.clone() };
            let caches: Vec<CacheStatus> = client.get_query("/v1/cache", &query).await?;
            print(*json, &caches, |c| status_text(c));
        }
        CacheCommand::Verify { node, json } => {
            let bar = spinner("re-hashing staged files".to_string());
            let result: Result<Vec<VerifiedVersion>, _> = client
                .post("/v1/cache/verify", &VerifyRequest { node: node.clone() })
                .await;
            bar.finish_and_clear();
            let r = result?;
            print(*json, &r, |r| verify_text(r));
            let unrepaired: usize = r
                .iter()
                .map(|v| v.mismatched.len() - v.repaired.len())
                .sum();
            if unrepaired > 0 {
                let which: Vec<String> = r
                    .iter()
                    .filter(|v| v.repaired.len() < v.mismatched.len())
                    .map(|v| format!("{}@{} on {}", v.name, short(&v.version), v.node))
                    .collect();
                anyhow::bail!(
                    "{unrepaired} damaged files could not be staged again, in {}; those versions are no longer used \
                     (old versions have no source to repair from, and a current one whose source changed needs \
                     `labpool dataset rescan NAME`); the next job that needs one stages it afresh",
                    which.join(", ")
                );
            }
        }
        CacheCommand::Stage { name, node } => {
            let queued: StageQueued = client
                .post(
                    "/v1/cache/stage",
                    &StageRequest {
                        name: name.clone(),
                        node: node.clone(),
                    },
                )
                .await?;
            if queued.nodes.is_empty() {
                crate::out!(
                    "{name}@{} is staged already on every node asked for",
                    short(&queued.version)
                );
                return Ok(());
            }
            follow_stage(&client, &queued).await?;
        }
    }
    Ok(())
}

/// Shows a progress bar until the warm-up is complete on every node it was queued on.
async fn follow_stage(client: &Client, queued: &StageQueued) -> anyhow::Result<()> {
    let bar = ProgressBar::new(0);
    bar.set_style(crate::progress::bytes_style());
    let label = format!("{}@{}", queued.name, short(&queued.version));
    let mut last_seen = Instant::now();
    loop {
        let caches: Vec<CacheStatus> = client.get("/v1/cache").await?;
        let mine: Vec<&CacheStatus> = caches
            .iter()
            .filter(|c| queued.nodes.contains(&c.node))
            .collect();
        let complete = |c: &CacheStatus| {
            c.versions
                .iter()
                .any(|v| v.complete && v.name == queued.name && v.version == queued.version)
        };
        let (mut done, mut total) = (0, 0);
        let mut active = false;
        for c in &mine {
            if let Some(s) = c
                .staging
                .iter()
                .find(|s| s.name == queued.name && s.version == queued.version)
            {
                done += s.progress.bytes_done;
                total += s.progress.bytes_total;
                active = true;
            }
            active |= c
                .queued
                .contains(&format!("{}@{}", queued.name, queued.version));
        }
        let finished = mine.iter().filter(|c| complete(c)).count();
        bar.set_message(format!("{label} {finished}/{} nodes", queued.nodes.len()));
        bar.set_length(total.max(1));
        bar.set_position(done);
        if finished == queued.nodes.len() {
            bar.finish_with_message(format!("{label} staged on {}", queued.nodes.join(", ")));
            return Ok(());
        }
        let key = format!("{}@{}: ", queued.name, queued.version);
        let failures: Vec<String> = mine
            .iter()
            .flat_map(|c| {
                c.failed
                    .iter()
                    .filter(|f| f.starts_with(&key))
                    .map(|f| format!("{}: {}", c.node, &f[key.len()..]))
            })
            .collect();
        if !active && !failures.is_empty() {
            bar.abandon();
            anyhow::bail!("staging {label} failed:\n  {}", failures.join("\n  "));
        }
        if active {
            last_seen = Instant::now();
        } else if last_seen.elapsed() > GONE_AFTER {
            bar.abandon();
            anyhow::bail!(
                "staging {label} stopped before it was complete on every node\nhint: `labpool cache status` shows what is staged, and the controller log says more"
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

fn status_text(caches: &[CacheStatus]) -> String {
    let mut out = String::new();
    for c in caches {
        let pct = (c.used_bytes * 100).checked_div(c.capacity).unwrap_or(0);
        out.push_str(&format!(
            "{}: {} of {} used ({pct}%)\n",
            c.node,
            labpool_units::format_size(c.used_bytes),
            labpool_units::format_size(c.capacity)
        ));
        let rows = c
            .versions
            .iter()
            .map(|v| {
                vec![
                    v.name.clone(),
                    format!("{}{}", short(&v.version), if v.current { " *" } else { "" }),
                    if v.complete { "complete" } else { "partial" }.to_string(),
                    v.files.to_string(),
                    labpool_units::format_size(v.bytes),
                    labpool_units::format_size(v.unique_bytes),
                    format!("{}/{}", v.hits, v.uses),
                    or_dash(v.last_use.as_ref()),
                    if v.pinned_by.is_empty() {
                        "-".to_string()
                    } else {
                        v.pinned_by
                            .iter()
                            .map(u64::to_string)
                            .collect::<Vec<_>>()
                            .join(",")
                    },
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "DATASET",
                "VERSION (* current)",
                "STATE",
                "FILES",
                "SIZE",
                "UNIQUE",
                "HITS/USES",
                "LAST USE",
                "PINNED BY JOBS",
            ],
            rows,
        ));
        for s in &c.staging {
            let p = &s.progress;
            out.push_str(&format!(
                "\nstaging {}@{} for {}: {} of {}, {} of {} files",
                s.name,
                short(&s.version),
                s.purpose,
                labpool_units::format_size(p.bytes_done),
                labpool_units::format_size(p.bytes_total),
                p.files_done,
                p.files_total
            ));
        }
        out.push('\n');
    }
    if caches.is_empty() {
        out.push_str("no node has reported its cache yet");
    }
    out.trim_end().to_string()
}

fn verify_text(versions: &[VerifiedVersion]) -> String {
    if versions.is_empty() {
        return "nothing staged to verify".to_string();
    }
    let mut out = String::new();
    for v in versions {
        let state = if v.mismatched.is_empty() {
            "ok".to_string()
        } else {
            format!(
                "{} damaged, {} staged again: {}",
                v.mismatched.len(),
                v.repaired.len(),
                v.mismatched.join(", ")
            )
        };
        out.push_str(&format!(
            "{} {}@{}: {} files, {state}\n",
            v.node,
            v.name,
            short(&v.version),
            v.files
        ));
    }
    out.trim_end().to_string()
}
