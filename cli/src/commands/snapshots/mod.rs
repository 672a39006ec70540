//! `labpool snapshot …`. Members' commands (list, ls, diff, find, restore) go through the
//! controller, which knows who is asking; admin maintenance (create, forget, prune, check)
//! works on the repository directly and needs root, like the repository itself.

mod admin;
pub(crate) mod copies;
mod members;

use crate::args::SnapshotCommand;
use crate::client::Client;
use crate::settings::Config;
use chrono::{DateTime, Utc};

/// Runs `labpool snapshot …`.
pub async fn run(command: &SnapshotCommand, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    match command {
        SnapshotCommand::Create {
            source,
            path,
            exclude,
            json,
        } => admin::create(config, source.as_deref(), path.as_deref(), exclude, *json).await,
        SnapshotCommand::List { source, json } => {
            members::list(&client, source.as_deref(), *json).await
        }
        SnapshotCommand::Ls {
            snapshot,
            path,
            recursive,
            json,
        } => members::ls(&client, snapshot, path.as_deref(), *recursive, *json).await,
        SnapshotCommand::Diff { a, b, json } => members::diff(&client, a, b, *json).await,
        SnapshotCommand::Find { path, json } => members::find(&client, path, *json).await,
        SnapshotCommand::Restore {
            path,
            at,
            target,
            overwrite,
            repo: Some(repo),
            json,
        } => {
            copies::restore_from(
                config,
                repo,
                path,
                at.as_deref(),
                target.as_deref(),
                *overwrite,
                *json,
            )
            .await
        }
        SnapshotCommand::Restore {
            path,
            at,
            target,
            overwrite,
            repo: None,
            json,
        } => {
            members::restore(
                &client,
                path,
                at.as_deref(),
                target.as_deref(),
                *overwrite,
                *json,
            )
            .await
        }
        SnapshotCommand::Forget {
            keep_last,
            keep_daily,
            keep_weekly,
            keep_monthly,
            dry_run,
            json,
        } => {
            admin::forget(
                config,
                *keep_last,
                *keep_daily,
                *keep_weekly,
                *keep_monthly,
                *dry_run,
                *json,
            )
            .await
        }
        SnapshotCommand::Prune { dry_run, json } => admin::prune(config, *dry_run, *json).await,
        SnapshotCommand::Check {
            read_data,
            repo,
            rebuild_index,
            json,
        } => admin::check(config, repo.as_deref(), *read_data, *rebuild_index, *json).await,
        SnapshotCommand::Copy { to, mirror, json } => {
            copies::copy_out(config, to.as_deref(), *mirror, *json).await
        }
        SnapshotCommand::Fetch { from, to, json } => copies::fetch(config, from, to, *json).await,
    }
}

fn local(t: DateTime<Utc>) -> String {
    crate::clock::when(t.timestamp_millis())
}
