//! `labpool snapshot …`. Members' commands (list, ls, diff, find, restore) go through the
//! controller, which knows who is asking; admin maintenance (create, forget, prune, check)
//! works on the repository directly and needs root, like the repository itself.

use crate::cli::SnapshotCommand;
use crate::client::Client;
use crate::controller::snapshots::{backup_options, open_or_init};
use crate::render::{print, table};
use crate::settings::{Config, SnapshotSource};
use crate::snapshot_api::{
    Change, DiffRequest, Entry, FindReport, FindRequest, LsRequest, RestoreRequest, RestoreStarted,
    RestoreStatus, SnapshotView,
};
use anyhow::{Context, bail};
use chrono::{DateTime, Local, Offset, Utc};
use indicatif::{HumanBytes, ProgressBar, ProgressStyle};
use labpool_snapshots::check::CheckReport;
use labpool_snapshots::prune::PruneReport;
use labpool_snapshots::retention::Verdict;
use labpool_snapshots::{Policy, Progress, Repository};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Runs `labpool snapshot …`.
pub async fn run(command: &SnapshotCommand, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    match command {
        SnapshotCommand::Create {
            source,
            path,
            exclude,
            json,
        } => create(config, source.as_deref(), path.as_deref(), exclude, *json).await,
        SnapshotCommand::List { source, json } => {
            let q = source
                .as_ref()
                .map(|s| format!("?source={s}"))
                .unwrap_or_default();
            let all: Vec<SnapshotView> = client.get(&format!("/v1/snapshots{q}")).await?;
            print(*json, &all, |all| {
                if all.is_empty() {
                    return "no snapshots yet; the first scheduled backup takes one (an admin can run `labpool snapshot create` now)".into();
                }
                table(
                    &[
                        "ID",
                        "TIME",
                        "SOURCE",
                        "PATH",
                        "FILES",
                        "SIZE",
                        "ADDED",
                        "UNREADABLE",
                    ],
                    all.iter()
                        .map(|s| {
                            vec![
                                s.id[..8].to_string(),
                                local(s.time),
                                s.source.clone(),
                                s.path.display().to_string(),
                                s.files.to_string(),
                                HumanBytes(s.bytes).to_string(),
                                HumanBytes(s.added_bytes).to_string(),
                                s.errors.to_string(),
                            ]
                        })
                        .collect(),
                )
            });
            Ok(())
        }
        SnapshotCommand::Ls {
            snapshot,
            path,
            recursive,
            json,
        } => {
            let req = LsRequest {
                snapshot: snapshot.clone(),
                path: path.as_deref().map(as_it_was).transpose()?,
                recursive: *recursive,
            };
            let entries: Vec<Entry> = client.post("/v1/snapshots/ls", &req).await?;
            print(*json, &entries, |e| {
                table(
                    &["MODE", "OWNER", "SIZE", "MODIFIED", "PATH"],
                    e.iter()
                        .map(|e| {
                            vec![
                                mode_string(e.kind, e.mode),
                                format!("{}:{}", crate::identity::user_name(e.uid), e.gid),
                                HumanBytes(e.size).to_string(),
                                local(e.mtime),
                                match &e.target {
                                    Some(t) => format!("{} -> {t}", e.path),
                                    None => e.path.clone(),
                                },
                            ]
                        })
                        .collect(),
                )
            });
            Ok(())
        }
        SnapshotCommand::Diff { a, b, json } => {
            let req = DiffRequest {
                a: a.clone(),
                b: b.clone(),
            };
            let changes: Vec<Change> = client.post("/v1/snapshots/diff", &req).await?;
            print(*json, &changes, |c| {
                let mut lines: Vec<String> = c
                    .iter()
                    .map(|c| {
                        let size = match (c.old_size, c.new_size) {
                            (Some(o), Some(n)) if o != n => {
                                format!("{} -> {}", HumanBytes(o), HumanBytes(n))
                            }
                            (_, Some(n)) => HumanBytes(n).to_string(),
                            (Some(o), None) => HumanBytes(o).to_string(),
                            _ => String::new(),
                        };
                        format!("{} {}  {size}", c.what, c.path)
                    })
                    .collect();
                let count = |w: char| c.iter().filter(|x| x.what == w).count();
                lines.push(format!(
                    "{} added, {} removed, {} changed, {} metadata only",
                    count('+'),
                    count('-'),
                    count('M'),
                    count('U')
                ));
                lines.join("\n")
            });
            Ok(())
        }
        SnapshotCommand::Find { path, json } => {
            let req = FindRequest {
                path: as_it_was(path)?,
            };
            let f: FindReport = client.post("/v1/snapshots/find", &req).await?;
            print(*json, &f, find_text);
            Ok(())
        }
        SnapshotCommand::Restore {
            path,
            at,
            target,
            overwrite,
            json,
        } => {
            let target = target
                .as_ref()
                .map(|t| {
                    std::fs::canonicalize(t).with_context(|| {
                        format!("--target {}: it must be an existing directory", t.display())
                    })
                })
                .transpose()?;
            let req = RestoreRequest {
                path: as_it_was(path)?,
                at: at.clone(),
                target,
                overwrite: *overwrite,
            };
            let started: RestoreStarted = client.post("/v1/snapshots/restore", &req).await?;
            let status = follow_restore(&client, &started, *json).await?;
            let report = match (&status.report, &status.error) {
                (Some(r), _) => r.clone(),
                (None, Some(e)) => bail!("restore failed: {e}"),
                _ => bail!("restore ended without a report"),
            };
            print(*json, &report, |r| {
                let mut text = format!(
                    "restored {} from snapshot {} ({}): {} files, {} directories, {} other, {}",
                    r.restored_to.display(),
                    &started.snapshot.id[..8],
                    local(started.snapshot.time),
                    r.files,
                    r.dirs,
                    r.others,
                    HumanBytes(r.bytes)
                );
                if r.skipped_not_owned > 0 {
                    text += &format!(
                        "\n{} entries were left out: they were not yours in the snapshot",
                        r.skipped_not_owned
                    );
                }
                for f in &r.failed {
                    text += &format!("\nFAILED {f}");
                }
                text
            });
            if !report.failed.is_empty() {
                bail!(
                    "{} entries could not be restored (listed above); `labpool snapshot check --read-data` (admins) shows damaged data",
                    report.failed.len()
                );
            }
            Ok(())
        }
        SnapshotCommand::Forget {
            keep_last,
            keep_daily,
            keep_weekly,
            keep_monthly,
            dry_run,
            json,
        } => {
            let given = [keep_last, keep_daily, keep_weekly, keep_monthly]
                .iter()
                .any(|k| k.is_some());
            let policy = if given {
                Policy {
                    keep_last: keep_last.unwrap_or(0),
                    keep_daily: keep_daily.unwrap_or(0),
                    keep_weekly: keep_weekly.unwrap_or(0),
                    keep_monthly: keep_monthly.unwrap_or(0),
                }
            } else {
                config.snapshot_policy()
            };
            if policy.is_empty() {
                bail!(
                    "this policy keeps nothing and would forget every snapshot\nhint: give at least one of --keep-last, --keep-daily, --keep-weekly, --keep-monthly"
                );
            }
            let repo = open_admin(config)?;
            let tz = Local::now().offset().fix();
            // The plan first, then (unless --dry-run) the same policy applied.
            let r = repo.clone();
            let plan =
                blocking(move || labpool_snapshots::prune::forget(&r, &policy, tz, true)).await?;
            if !*json {
                println!("{}", plan_table(&plan));
            }
            let verdicts = if *dry_run {
                plan
            } else {
                blocking(move || labpool_snapshots::prune::forget(&repo, &policy, tz, false))
                    .await?
            };
            print(*json, &verdicts, |v| forget_summary(v, *dry_run));
            Ok(())
        }
        SnapshotCommand::Prune { dry_run, json } => {
            let repo = open_admin(config)?;
            let dry = *dry_run;
            let r = with_bar("pruning", move |p| {
                labpool_snapshots::prune::prune(&repo, dry, p)
            })
            .await?;
            print(*json, &r, |r| prune_text(r, dry));
            Ok(())
        }
        SnapshotCommand::Check {
            read_data,
            rebuild_index,
            json,
        } => {
            let repo = if *rebuild_index {
                let path = config.snapshot_repo();
                need_owner(&path)?;
                let (repo, done) =
                    blocking(move || Repository::open_rebuilding_index(&path)).await?;
                eprintln!(
                    "index rebuilt from {} packs and {} snapshot records (the old one is index.sqlite.broken)",
                    done.packs_indexed, done.records_fixed
                );
                Arc::new(repo)
            } else {
                open_admin(config)?
            };
            let read = *read_data;
            let r = with_bar("checking", move |p| {
                labpool_snapshots::check::check(&repo, read, p)
            })
            .await?;
            print(*json, &r, check_text);
            if !r.ok() {
                bail!(
                    "the repository has problems (listed above); files named there cannot be restored from the snapshots named"
                );
            }
            Ok(())
        }
    }
}

/// A path as the user means it: absolute, with `.` and `..` resolved by name (it may not
/// exist any more, so it is not resolved on disk).
fn as_it_was(p: &Path) -> anyhow::Result<PathBuf> {
    let abs = std::path::absolute(p).with_context(|| format!("bad path {}", p.display()))?;
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    Ok(out)
}

fn local(t: DateTime<Utc>) -> String {
    t.with_timezone(&Local)
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

fn mode_string(kind: char, mode: u32) -> String {
    let mut s = String::from(kind);
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        s.push(if mode & (0o400 >> i) != 0 { c } else { '-' });
    }
    s
}

fn find_text(f: &FindReport) -> String {
    if f.sightings.is_empty() {
        return format!(
            "{}: no snapshot covers it (`labpool snapshot list` shows what is backed up)",
            f.path
        );
    }
    let mut text = table(
        &["SNAPSHOT", "TIME", "PRESENT", "SIZE", "MODIFIED"],
        f.sightings
            .iter()
            .map(|s| {
                vec![
                    s.snapshot[..8].to_string(),
                    local(s.time),
                    if s.present { "yes" } else { "-" }.to_string(),
                    s.size
                        .map(|b| HumanBytes(b).to_string())
                        .unwrap_or_default(),
                    s.mtime.map(local).unwrap_or_default(),
                ]
            })
            .collect(),
    );
    let when = |id: &str| {
        f.sightings
            .iter()
            .find(|s| s.snapshot == id)
            .map(|s| local(s.time))
            .unwrap_or_default()
    };
    match (&f.last_seen, &f.gone_in) {
        (Some(last), Some(gone)) => {
            text += &format!(
                "\n{} was last seen in {} ({}) and is gone in {} ({}): it was deleted between them.\nget it back: labpool snapshot restore {} --at {}",
                f.path,
                &last[..8],
                when(last),
                &gone[..8],
                when(gone),
                f.path,
                &last[..8]
            )
        }
        (Some(last), None) => {
            text += &format!(
                "\n{} is in the newest snapshot {} ({}).\nget that copy back: labpool snapshot restore {} [--target DIR]",
                f.path,
                &last[..8],
                when(last),
                f.path
            )
        }
        _ => {
            text += &format!(
                "\n{} is in none of these snapshots (or was not yours)",
                f.path
            )
        }
    }
    text
}

fn plan_table(v: &[Verdict]) -> String {
    table(
        &["SNAPSHOT", "TIME", "SOURCE", "VERDICT", "KEPT BY"],
        v.iter()
            .map(|v| {
                vec![
                    v.snapshot.id[..8].to_string(),
                    local(v.snapshot.time),
                    v.snapshot.source.clone(),
                    if v.keep { "keep" } else { "forget" }.to_string(),
                    v.reasons.join(","),
                ]
            })
            .collect(),
    )
}

fn forget_summary(v: &[Verdict], dry_run: bool) -> String {
    let gone = v.iter().filter(|v| !v.keep).count();
    if dry_run {
        format!(
            "would forget {gone} of {} snapshots (dry run: nothing changed)",
            v.len()
        )
    } else {
        format!(
            "forgot {gone} of {} snapshots; `labpool snapshot prune` frees the space only they used",
            v.len()
        )
    }
}

fn prune_text(r: &PruneReport, dry_run: bool) -> String {
    format!(
        "{}{} packs ({}): {} deleted, {} rewritten into {} new; {} -> {}",
        if dry_run { "dry run: " } else { "" },
        r.packs,
        HumanBytes(r.bytes_before),
        r.packs_deleted,
        r.packs_rewritten,
        r.packs_written,
        HumanBytes(r.bytes_before),
        HumanBytes(r.bytes_after)
    ) + &r
        .damaged_packs
        .iter()
        .map(|p| format!("\nleft alone: pack {p} holds damaged data still in use (`labpool snapshot check --read-data` names the files)"))
        .collect::<String>()
}

fn check_text(r: &CheckReport) -> String {
    let mut text = format!(
        "{} snapshots, {} packs, {} trees{}: {}",
        r.snapshots,
        r.packs,
        r.trees,
        if r.blobs_read > 0 {
            format!(", {} blobs read and hashed", r.blobs_read)
        } else {
            String::new()
        },
        if r.ok() { "no problems" } else { "PROBLEMS" }
    );
    for e in &r.errors {
        text += &format!("\nerror: {e}");
    }
    for f in &r.damaged_files {
        text += &format!("\ndamaged: {f}");
    }
    text
}

/// Opens the repository for admin work: it is root's, so the caller must be its owner.
fn open_admin(config: &Config) -> anyhow::Result<Arc<Repository>> {
    let path = config.snapshot_repo();
    need_owner(&path)?;
    Ok(Arc::new(Repository::open(&path).with_context(|| {
        format!(
            "snapshot repository {} (from [snapshots] repo in {})",
            path.display(),
            config.path.display()
        )
    })?))
}

fn need_owner(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid();
    let owner = std::fs::metadata(path)
        .or_else(|_| std::fs::metadata(path.parent().unwrap_or(Path::new("/"))))
        .map(|m| m.uid())
        .unwrap_or(0);
    if !me.is_root() && me.as_raw() != owner {
        bail!(
            "the snapshot repository {} belongs to uid {owner}; this command is for admins\nhint: run it with sudo; members use `labpool snapshot find` and `labpool snapshot restore`",
            path.display()
        );
    }
    Ok(())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, labpool_snapshots::SnapshotError> + Send + 'static,
) -> anyhow::Result<T> {
    Ok(tokio::task::spawn_blocking(f).await??)
}

/// Runs `f` on a blocking thread with a progress bar over its counters.
async fn with_bar<T: Send + 'static>(
    label: &str,
    f: impl FnOnce(&Progress) -> Result<T, labpool_snapshots::SnapshotError> + Send + 'static,
) -> anyhow::Result<T> {
    let progress = Arc::new(Progress::default());
    let p = progress.clone();
    let mut task = tokio::task::spawn_blocking(move || f(&p));
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
        )?
        .progress_chars("=> "),
    );
    bar.set_message(label.to_string());
    let result = loop {
        tokio::select! {
            r = &mut task => break r,
            _ = tokio::time::sleep(Duration::from_millis(200)) => {
                let total = Progress::get(&progress.total_bytes);
                let done = Progress::get(&progress.bytes);
                bar.set_length(total.max(done));
                bar.set_position(done);
            }
        }
    };
    bar.finish_and_clear();
    Ok(result??)
}

async fn create(
    config: &Config,
    source: Option<&str>,
    path: Option<&Path>,
    exclude: &[String],
    json: bool,
) -> anyhow::Result<()> {
    let sources: Vec<SnapshotSource> = match (source, path) {
        (_, Some(p)) => vec![SnapshotSource {
            name: "path".into(),
            path: std::fs::canonicalize(p).with_context(|| {
                format!("--path {}: it must be an existing directory", p.display())
            })?,
            schedule: String::new(),
            exclude: exclude.to_vec(),
            one_file_system: true,
        }],
        (Some(name), None) => {
            let all = config.snapshot_sources();
            match all.iter().find(|s| s.name == name) {
                Some(s) => vec![s.clone()],
                None => bail!(
                    "no snapshot source {name:?}; the sources are: {}\nhint: add it as [[snapshots.source]] in {}, or use --path DIR",
                    all.iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    config.path.display()
                ),
            }
        }
        (None, None) => config
            .snapshot_sources()
            .into_iter()
            .filter(|s| {
                let there = s.path.is_dir();
                if !there {
                    eprintln!(
                        "skipping source {}: {} does not exist",
                        s.name,
                        s.path.display()
                    );
                }
                there
            })
            .collect(),
    };
    let repo_path = config.snapshot_repo();
    need_owner(&repo_path)?;
    let repo = Arc::new(open_or_init(&repo_path).with_context(|| {
        format!(
            "snapshot repository {} (from [snapshots] repo in {})",
            repo_path.display(),
            config.path.display()
        )
    })?);
    let mut made = Vec::new();
    for src in sources {
        let opts = backup_options(&src);
        let r = repo.clone();
        let report = with_bar(&format!("backing up {}", src.path.display()), move |p| {
            labpool_snapshots::create(&r, &opts, p)
        })
        .await?;
        for w in &report.warnings {
            eprintln!("warning: {w}");
        }
        made.push(SnapshotView::from(&report.snapshot));
    }
    print(json, &made, |made| {
        made.iter()
            .map(|s| {
                format!(
                    "snapshot {} of {} ({}): {} files, {}, added {}{}",
                    &s.id[..8],
                    s.source,
                    s.path.display(),
                    s.files,
                    HumanBytes(s.bytes),
                    HumanBytes(s.added_bytes),
                    if s.errors > 0 {
                        format!(", {} unreadable entries skipped (warnings above)", s.errors)
                    } else {
                        String::new()
                    }
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}

/// Polls a restore until it ends, with a progress bar (none with --json).
async fn follow_restore(
    client: &Client,
    started: &RestoreStarted,
    quiet: bool,
) -> anyhow::Result<RestoreStatus> {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(started.total_bytes)
    };
    bar.set_style(ProgressStyle::with_template(
        "restoring [{bar:30}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
    )?
    .progress_chars("=> "));
    loop {
        let s: RestoreStatus = client
            .get(&format!("/v1/snapshots/restores/{}", started.id))
            .await?;
        bar.set_position(s.bytes);
        if s.report.is_some() || s.error.is_some() {
            bar.finish_and_clear();
            return Ok(s);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
