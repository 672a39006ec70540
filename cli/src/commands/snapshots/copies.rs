//! `snapshot copy` and `snapshot fetch` (admins): the repository copied off this box and back;
//! and a restore straight from a repository directory (`restore --repo`), for the day the
//! primary is lost.

use crate::api::NodeView;
use crate::client::Client;
use crate::commands::snapshots::admin::{need_owner, open_admin, with_bar};
use crate::render::print;
use crate::settings::Config;
use crate::snapshot_copies::CopyTarget;
use crate::snapshot_copies::run::{resolve_target, run_copy};
use anyhow::bail;
use chrono::{Local, Offset, Utc};
use labpool_snapshots::copy::{CopyReport, DirStore, copy};
use labpool_snapshots::restore::restore_to;
use labpool_snapshots::select::{At, pick};
use labpool_snapshots::{RestoreOptions, SnapshotError};
use std::path::Path;

fn report_text(r: &CopyReport) -> String {
    format!(
        "{} sent ({}), {} there already{}; the copy holds {}",
        labpool_units::count(r.files_sent, "file"),
        labpool_units::format_size(r.bytes_sent),
        r.files_present,
        if r.files_removed > 0 {
            format!(", {} removed", r.files_removed)
        } else {
            String::new()
        },
        labpool_units::count(r.records, "snapshot")
    )
}

/// The address of `node`'s agent, from the controller.
async fn node_address(config: &Config, target: &CopyTarget) -> anyhow::Result<Option<String>> {
    let CopyTarget::Node(name) = target else {
        return Ok(None);
    };
    let nodes: Vec<NodeView> = Client::new(&config.controller.socket)
        .get("/v1/nodes")
        .await?;
    match nodes.into_iter().find(|n| &n.name == name) {
        Some(n) => Ok(n.agent),
        None => bail!("no node {name} in the pool\nhint: `labpool nodes` lists them"),
    }
}

/// `snapshot copy [--to TARGET] [--mirror]`.
pub(super) async fn copy_out(
    config: &Config,
    to: Option<&str>,
    mirror: bool,
    json: bool,
) -> anyhow::Result<()> {
    need_owner(&config.snapshot_repo())?;
    let (text, target) = resolve_target(config, to)?;
    let address = node_address(config, &target).await?;
    let config2 = config.clone();
    let runtime = tokio::runtime::Handle::current();
    let (_, r) = with_bar("copying", move |p| {
        run_copy(&config2, Some(&text), address, mirror, p, runtime)
            .map_err(|e| SnapshotError::Invalid(format!("{e:#}")))
    })
    .await?;
    print(json, &r, report_text);
    Ok(())
}

/// `snapshot fetch --from TARGET --to DIR`: the copy brought into a local directory, sending
/// only what it lacks (a fetch cut short is finished by the next).
pub(super) async fn fetch(
    config: &Config,
    from: &str,
    to: &Path,
    json: bool,
) -> anyhow::Result<()> {
    let target = CopyTarget::parse(from).map_err(anyhow::Error::msg)?;
    let address = node_address(config, &target).await?;
    let (config2, dir) = (config.clone(), to.to_path_buf());
    let runtime = tokio::runtime::Handle::current();
    let r = with_bar("fetching", move |p| {
        let store = crate::snapshot_copies::open(&target, &config2, address, runtime)
            .map_err(|e| SnapshotError::Invalid(format!("{e:#}")))?;
        copy(store.as_ref(), &DirStore::new(&dir), false, p)
    })
    .await?;
    print(json, &r, report_text);
    if !json {
        eprintln!(
            "check it with `labpool snapshot check --repo {} --read-data`; restore from it with `labpool snapshot restore PATH --repo {}`",
            to.display(),
            to.display()
        );
    }
    Ok(())
}

/// `snapshot restore PATH --repo DIR`: restored by this process, as root, from a repository
/// directory (a copy), without the controller.
pub(super) async fn restore_from(
    config: &Config,
    repo: &Path,
    path: &Path,
    at: Option<&str>,
    target: Option<&Path>,
    overwrite: bool,
    json: bool,
) -> anyhow::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("restore --repo reads the repository directly, as root\nhint: run it with sudo");
    }
    let r = open_admin(config, Some(repo))?;
    let tz = Local::now().offset().fix();
    let at = At::parse(at.unwrap_or("latest"), Utc::now(), tz)?;
    let (path, target) = (path.to_path_buf(), target.map(Path::to_path_buf));
    let opts = RestoreOptions {
        overwrite,
        only_uid: None,
        set_owner: true,
        member_groups: None,
    };
    let report = with_bar("restoring", move |p| {
        let (snap, node) = pick(&r, &path, &at, None)?;
        restore_to(&r, &snap, &node, &path, target.as_deref(), &opts, p)
    })
    .await?;
    print(json, &report, |r| {
        format!(
            "restored {} ({}, {})",
            r.restored_to.display(),
            labpool_units::count(r.files, "file"),
            labpool_units::format_size(r.bytes)
        )
    });
    if !report.failed.is_empty() {
        bail!(
            "{} entries could not be restored:\n{}",
            report.failed.len(),
            report.failed.join("\n")
        );
    }
    Ok(())
}

/// The newest (or `at`) snapshot of the controller's state backup (source `labpool-state`) in
/// the repository directory `repo`, restored into `into` (as root): the backup's directory,
/// and which snapshot it came from, in words.
pub(crate) async fn state_from_repo(
    repo: &Path,
    at: Option<&str>,
    into: &Path,
) -> anyhow::Result<(std::path::PathBuf, String)> {
    if !nix::unistd::geteuid().is_root() {
        bail!("restore --from-repo reads the repository directly, as root\nhint: run it with sudo");
    }
    if !repo.join("config.json").exists() {
        bail!(
            "{} holds no snapshot repository (no config.json)\nhint: bring the off-box copy here with `labpool snapshot fetch --from TARGET --to {}`",
            repo.display(),
            repo.display()
        );
    }
    let r = labpool_snapshots::Repository::open(repo)?;
    let source = crate::controller::snapshots::service::STATE_TASK;
    let tz = Local::now().offset().fix();
    let at = At::parse(at.unwrap_or("latest"), Utc::now(), tz)?;
    let snaps: Vec<_> = r
        .snapshots()?
        .into_iter()
        .filter(|s| s.source == source)
        .collect();
    let chosen = |s: &&labpool_snapshots::Snapshot| match &at {
        At::Latest => true,
        At::Before(t) => s.time <= *t,
        At::Snapshot(prefix) => s.id.starts_with(prefix.as_str()),
    };
    let Some(newest) = snaps.iter().filter(chosen).max_by_key(|s| s.time) else {
        bail!(
            "{} holds {} of {source}{}\nhint: the controller takes one every night with snapshots on, and `labpool state backup` takes one now",
            repo.display(),
            if snaps.is_empty() {
                "no snapshot".to_string()
            } else {
                "no snapshot at that time".to_string()
            },
            if snaps.is_empty() {
                String::new()
            } else {
                format!(" (it holds {})", snaps.len())
            },
        );
    };
    // The snapshot's root is the backup directory itself.
    let snap = newest.clone();
    let into = into.to_path_buf();
    let opts = RestoreOptions {
        overwrite: true,
        only_uid: None,
        set_owner: true,
        member_groups: None,
    };
    let report = with_bar("restoring", move |p| {
        restore_to(&r, &snap, &snap.root, &snap.path, Some(&into), &opts, p)
    })
    .await?;
    let shown = format!(
        "the snapshot {} of {} in {}",
        newest.short_id(),
        newest.time.with_timezone(&Local).format("%Y-%m-%d %H:%M"),
        repo.display()
    );
    Ok((report.restored_to, shown))
}
