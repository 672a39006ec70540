//! Admin maintenance (create, forget, prune, check): works on the repository directly and
//! needs root, like the repository itself.

use crate::api::snapshots::SnapshotView;
use crate::commands::snapshots::local;
use crate::controller::snapshots::{backup_options, open_or_init};
use crate::render::{print, table};
use crate::settings::{Config, SnapshotSource};
use anyhow::{Context, bail};
use chrono::{Local, Offset};
use indicatif::ProgressBar;
use labpool_snapshots::check::CheckReport;
use labpool_snapshots::prune::PruneReport;
use labpool_snapshots::retention::Verdict;
use labpool_snapshots::{Policy, Progress, Repository};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// `snapshot create`.
pub(super) async fn create(
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
                    "snapshot {} of {} ({}): {}, {}, added {}{}",
                    &s.id[..8],
                    s.source,
                    s.path.display(),
                    labpool_units::count(s.files, "file"),
                    labpool_units::format_size(s.bytes),
                    labpool_units::format_size(s.added_bytes),
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

/// `snapshot forget`.
pub(super) async fn forget(
    config: &Config,
    keep_last: Option<u32>,
    keep_daily: Option<u32>,
    keep_weekly: Option<u32>,
    keep_monthly: Option<u32>,
    dry_run: bool,
    json: bool,
) -> anyhow::Result<()> {
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
    let repo = open_admin(config, None)?;
    let tz = Local::now().offset().fix();
    // The plan first, then (unless --dry-run) the same policy applied.
    let r = repo.clone();
    let plan = blocking(move || labpool_snapshots::prune::forget(&r, &policy, tz, true)).await?;
    if !json {
        crate::out!("{}", plan_table(&plan));
    }
    let verdicts = if dry_run {
        plan
    } else {
        blocking(move || labpool_snapshots::prune::forget(&repo, &policy, tz, false)).await?
    };
    print(json, &verdicts, |v| forget_summary(v, dry_run));
    Ok(())
}

/// `snapshot prune`.
pub(super) async fn prune(config: &Config, dry_run: bool, json: bool) -> anyhow::Result<()> {
    let repo = open_admin(config, None)?;
    let dry = dry_run;
    let r = with_bar("pruning", move |p| {
        labpool_snapshots::prune::prune(&repo, dry, p)
    })
    .await?;
    print(json, &r, |r| prune_text(r, dry));
    Ok(())
}

/// `snapshot check`.
pub(super) async fn check(
    config: &Config,
    repo: Option<&Path>,
    read_data: bool,
    rebuild_index: bool,
    json: bool,
) -> anyhow::Result<()> {
    let other = repo.map(Path::to_path_buf);
    let repo = if rebuild_index {
        let path = other.clone().unwrap_or_else(|| config.snapshot_repo());
        need_owner(&path)?;
        let (repo, done) = blocking(move || Repository::open_rebuilding_index(&path)).await?;
        eprintln!(
            "index rebuilt from {} packs and {} snapshot records (the old one is index.sqlite.broken)",
            done.packs_indexed, done.records_fixed
        );
        Arc::new(repo)
    } else {
        open_admin(config, other.as_deref())?
    };
    let read = read_data;
    let r = with_bar("checking", move |p| {
        labpool_snapshots::check::check(&repo, read, p)
    })
    .await?;
    print(json, &r, check_text);
    if !r.ok() {
        bail!(
            "the repository has problems (listed above); files named there cannot be restored from the snapshots named"
        );
    }
    Ok(())
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
        labpool_units::format_size(r.bytes_before),
        r.packs_deleted,
        r.packs_rewritten,
        r.packs_written,
        labpool_units::format_size(r.bytes_before),
        labpool_units::format_size(r.bytes_after)
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
/// The config's repository, or `other` (a copy, with `--repo`), for an admin.
pub(super) fn open_admin(config: &Config, other: Option<&Path>) -> anyhow::Result<Arc<Repository>> {
    let path = other.map_or_else(|| config.snapshot_repo(), Path::to_path_buf);
    need_owner(&path)?;
    if other.is_some() && !path.join("config.json").exists() {
        bail!(
            "{} holds no snapshot repository (no config.json)\nhint: bring a copy here with `labpool snapshot fetch --from TARGET --to {}`",
            path.display(),
            path.display()
        );
    }
    Ok(Arc::new(Repository::open(&path).with_context(|| {
        format!(
            "snapshot repository {} (from [snapshots] repo in {})",
            path.display(),
            config.path.display()
        )
    })?))
}

pub(super) fn need_owner(path: &Path) -> anyhow::Result<()> {
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
pub(super) async fn with_bar<T: Send + 'static>(
    label: &str,
    f: impl FnOnce(&Progress) -> Result<T, labpool_snapshots::SnapshotError> + Send + 'static,
) -> anyhow::Result<T> {
    let progress = Arc::new(Progress::default());
    let p = progress.clone();
    let mut task = tokio::task::spawn_blocking(move || f(&p));
    let bar = ProgressBar::new(0);
    bar.set_style(crate::progress::bytes_style());
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
