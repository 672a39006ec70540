//! Members' snapshot commands (list, ls, diff, find, restore): requests to the controller,
//! which knows who is asking.

use crate::api::snapshots::ListQuery;
use crate::api::snapshots::{
    Change, DiffRequest, Entry, FindReport, FindRequest, LsRequest, RestoreRequest, RestoreStarted,
    RestoreStatus, SnapshotView,
};
use crate::client::Client;
use crate::commands::snapshots::local;
use crate::render::{print, table};
use anyhow::{Context, bail};
use indicatif::ProgressBar;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// `snapshot list`.
pub(super) async fn list(client: &Client, source: Option<&str>, json: bool) -> anyhow::Result<()> {
    let query = ListQuery {
        source: source.map(str::to_string),
    };
    let all: Vec<SnapshotView> = client.get_query("/v1/snapshots", &query).await?;
    print(json, &all, |all| {
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
                        labpool_units::format_size(s.bytes),
                        labpool_units::format_size(s.added_bytes),
                        s.errors.to_string(),
                    ]
                })
                .collect(),
        )
    });
    Ok(())
}

/// `snapshot ls`.
pub(super) async fn ls(
    client: &Client,
    snapshot: &str,
    path: Option<&Path>,
    recursive: bool,
    json: bool,
) -> anyhow::Result<()> {
    let req = LsRequest {
        snapshot: snapshot.to_string(),
        path: path.map(as_it_was).transpose()?,
        recursive,
    };
    let entries: Vec<Entry> = client.post("/v1/snapshots/ls", &req).await?;
    print(json, &entries, |e| {
        table(
            &["MODE", "OWNER", "SIZE", "MODIFIED", "PATH"],
            e.iter()
                .map(|e| {
                    vec![
                        mode_string(e.kind, e.mode),
                        format!("{}:{}", crate::identity::user_name(e.uid), e.gid),
                        labpool_units::format_size(e.size),
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

/// `snapshot diff`.
pub(super) async fn diff(client: &Client, a: &str, b: &str, json: bool) -> anyhow::Result<()> {
    let req = DiffRequest {
        a: a.to_string(),
        b: b.to_string(),
    };
    let changes: Vec<Change> = client.post("/v1/snapshots/diff", &req).await?;
    print(json, &changes, |c| {
        let mut lines: Vec<String> = c
            .iter()
            .map(|c| {
                let size = match (c.old_size, c.new_size) {
                    (Some(o), Some(n)) if o != n => {
                        format!(
                            "{} -> {}",
                            labpool_units::format_size(o),
                            labpool_units::format_size(n)
                        )
                    }
                    (_, Some(n)) => labpool_units::format_size(n),
                    (Some(o), None) => labpool_units::format_size(o),
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

/// `snapshot find`.
pub(super) async fn find(client: &Client, path: &Path, json: bool) -> anyhow::Result<()> {
    let req = FindRequest {
        path: as_it_was(path)?,
    };
    let f: FindReport = client.post("/v1/snapshots/find", &req).await?;
    if f.sightings.is_empty() {
        // Nothing covers it: an answer a script must not take for "found nowhere in them".
        if json {
            print(json, &f, find_text);
        }
        anyhow::bail!("{}", find_text(&f));
    }
    print(json, &f, find_text);
    // In none of them: nothing to restore, and a script that checks `$?` must know.
    anyhow::ensure!(
        f.last_seen.is_some(),
        "{} is in none of the {} that cover it: nothing to restore",
        f.path,
        labpool_units::count(f.sightings.len() as u64, "snapshot")
    );
    Ok(())
}

/// `snapshot restore`.
pub(super) async fn restore(
    client: &Client,
    path: &Path,
    at: Option<&str>,
    target: Option<&Path>,
    overwrite: bool,
    json: bool,
) -> anyhow::Result<()> {
    let target = target
        .map(|t| {
            std::fs::canonicalize(t).with_context(|| {
                format!("--target {}: it must be an existing directory", t.display())
            })
        })
        .transpose()?;
    let req = RestoreRequest {
        path: as_it_was(path)?,
        at: at.map(str::to_string),
        target,
        overwrite,
    };
    let started: RestoreStarted = client.post("/v1/snapshots/restore", &req).await?;
    let status = follow_restore(client, &started, json).await?;
    let report = match (&status.report, &status.error) {
        (Some(r), _) => r.clone(),
        (None, Some(e)) => bail!("restore failed: {e}"),
        _ => bail!("restore ended without a report"),
    };
    print(json, &report, |r| {
        let mut text = format!(
            "restored {} from snapshot {} ({}): {}, {}, {} other, {} in all",
            r.restored_to.display(),
            &started.snapshot.id[..8],
            local(started.snapshot.time),
            labpool_units::count(r.files, "file"),
            labpool_units::count(r.dirs, "directory"),
            r.others,
            labpool_units::format_size(r.bytes)
        );
        if r.skipped_not_owned > 0 {
            text += &format!(
                "\n{} left out: they were not yours in the snapshot",
                labpool_units::count(r.skipped_not_owned, "entry")
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
                    s.size.map(labpool_units::format_size).unwrap_or_default(),
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
    bar.set_style(crate::progress::bytes_style());
    bar.set_message("restoring");
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
