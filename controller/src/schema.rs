//! The state database's schema: the migrations this binary embeds (`migrations/`), and how a
//! database's applied ones compare with them, which is what `labpool upgrade-check` reads before
//! an upgrade and what the controller refuses at start when they disagree. Every released
//! schema is kept as a fixture (`tests/fixtures/state`, made by `scripts/schema-fixture`) that
//! the upgrade test migrates.

use sqlx::SqlSafeStr;
use sqlx::migrate::{MigrateError, Migration, MigrationType, Migrator};
use sqlx::sqlite::SqliteConnectOptions;
use std::path::Path;

/// The migrations, in order.
pub(crate) fn migrator() -> Migrator {
    let migration = |version, name: &'static str, sql: &'static str| {
        Migration::new(
            version,
            name.into(),
            MigrationType::Simple,
            sql.into_sql_str(),
            false,
        )
    };
    Migrator::with_migrations(vec![
        migration(1, "jobs", include_str!("../../migrations/0001_jobs.sql")),
        migration(
            2,
            "policy",
            include_str!("../../migrations/0002_policy.sql"),
        ),
        migration(
            3,
            "datasets",
            include_str!("../../migrations/0003_datasets.sql"),
        ),
        migration(
            4,
            "quotas",
            include_str!("../../migrations/0004_quotas.sql"),
        ),
        migration(5, "envs", include_str!("../../migrations/0005_envs.sql")),
        migration(
            6,
            "node drain",
            include_str!("../../migrations/0006_node_drain.sql"),
        ),
        migration(
            7,
            "node agents",
            include_str!("../../migrations/0007_node_agents.sql"),
        ),
        migration(
            8,
            "submit keys",
            include_str!("../../migrations/0008_submit_keys.sql"),
        ),
        migration(
            9,
            "storage probe",
            include_str!("../../migrations/0009_storage_probe.sql"),
        ),
        migration(10, "hold", include_str!("../../migrations/0010_hold.sql")),
        migration(11, "steps", include_str!("../../migrations/0011_steps.sql")),
        migration(
            12,
            "requeue",
            include_str!("../../migrations/0012_requeue.sql"),
        ),
        migration(13, "gang", include_str!("../../migrations/0013_gang.sql")),
        migration(
            14,
            "preemption",
            include_str!("../../migrations/0014_preemption.sql"),
        ),
        migration(
            15,
            "reservations",
            include_str!("../../migrations/0015_reservations.sql"),
        ),
        migration(
            16,
            "gpu usage",
            include_str!("../../migrations/0016_gpu_usage.sql"),
        ),
        migration(
            17,
            "gang part ended",
            include_str!("../../migrations/0017_part_ended.sql"),
        ),
        migration(
            18,
            "gpu pause",
            include_str!("../../migrations/0018_gpu_pause.sql"),
        ),
    ])
}

/// Why a database's migrations do not fit this binary, with what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// The database ran a migration this binary does not have.
    #[error(
        "it was migrated by a newer labpool (migration {0}, which this binary does not have): run the labpool that last ran it, or restore a backup taken before that upgrade (labpool state restore)"
    )]
    Newer(i64),
    /// A migration the database ran differs from this binary's.
    #[error(
        "migration {0} it ran differs from this binary's: a development build made it, not a release; run the build that made it, or restore a backup taken before it ran (labpool state restore)"
    )]
    Changed(i64),
}

impl Mismatch {
    /// The mismatch sqlx found, if that is what `e` is.
    pub fn of(e: &MigrateError) -> Option<Mismatch> {
        match e {
            MigrateError::VersionMissing(v) => Some(Mismatch::Newer(*v)),
            MigrateError::VersionMismatch(v) => Some(Mismatch::Changed(*v)),
            _ => None,
        }
    }
}

/// A database's schema against this binary's migrations.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Schema {
    /// The newest migration the database ran; 0 for an empty one.
    pub version: i64,
    /// This binary's migrations it has not run, which the next start applies: (version, name).
    pub pending: Vec<(i64, String)>,
    /// Migrations it ran that this binary does not have (a newer labpool ran them).
    pub unknown: Vec<i64>,
    /// Migrations it ran in another form than this binary's.
    pub changed: Vec<i64>,
    /// Jobs it records as running now.
    pub running_jobs: i64,
}

impl Schema {
    /// The first reason this binary cannot open the database, if any.
    pub fn mismatch(&self) -> Option<Mismatch> {
        self.unknown
            .first()
            .map(|v| Mismatch::Newer(*v))
            .or_else(|| self.changed.first().map(|v| Mismatch::Changed(*v)))
    }
}

/// Reads the schema of the database at `path`, read-only: safe while the controller runs.
pub async fn read(path: &Path) -> Result<Schema, sqlx::Error> {
    let db =
        sqlx::SqlitePool::connect_with(SqliteConnectOptions::new().filename(path).read_only(true))
            .await?;
    let has_table: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_one(&db)
    .await?;
    let applied: Vec<(i64, Vec<u8>)> = if has_table > 0 {
        sqlx::query_as(
            "SELECT version, checksum FROM _sqlx_migrations WHERE success = 1 ORDER BY version",
        )
        .fetch_all(&db)
        .await?
    } else {
        Vec::new()
    };
    let running_jobs: i64 = if has_table > 0 {
        sqlx::query_scalar("SELECT count(*) FROM jobs WHERE state = 'RUNNING'")
            .fetch_one(&db)
            .await?
    } else {
        0
    };
    db.close().await;
    Ok(compare(&migrator(), &applied, running_jobs))
}

/// The comparison itself, of `applied` (version, checksum) with `ours`.
fn compare(ours: &Migrator, applied: &[(i64, Vec<u8>)], running_jobs: i64) -> Schema {
    let mut schema = Schema {
        version: applied.iter().map(|(v, _)| *v).max().unwrap_or(0),
        running_jobs,
        ..Schema::default()
    };
    for (v, sum) in applied {
        match ours.iter().find(|m| m.version == *v) {
            None => schema.unknown.push(*v),
            Some(m) if m.checksum.as_ref() != sum.as_slice() => schema.changed.push(*v),
            Some(_) => {}
        }
    }
    for m in ours.iter() {
        if !applied.iter().any(|(v, _)| *v == m.version) {
            schema.pending.push((m.version, m.description.to_string()));
        }
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checksum(v: i64) -> Vec<u8> {
        migrator()
            .iter()
            .find(|m| m.version == v)
            .unwrap()
            .checksum
            .to_vec()
    }

    #[test]
    fn a_database_short_of_migrations_has_them_pending_and_a_newer_one_is_named() {
        let ours = migrator();
        let newest = ours.iter().map(|m| m.version).max().unwrap();
        let all_but_last: Vec<(i64, Vec<u8>)> = (1..newest).map(|v| (v, checksum(v))).collect();
        let s = compare(&ours, &all_but_last, 2);
        assert_eq!(s.version, newest - 1);
        assert_eq!(s.pending.len(), 1);
        assert_eq!(s.pending[0].0, newest);
        assert_eq!(s.mismatch(), None);

        let mut newer = all_but_last.clone();
        newer.push((newest, checksum(newest)));
        newer.push((newest + 1, vec![0; 48]));
        let s = compare(&ours, &newer, 0);
        assert!(s.pending.is_empty());
        assert_eq!(s.mismatch(), Some(Mismatch::Newer(newest + 1)));

        let mut changed = all_but_last;
        changed[0].1 = vec![1; 48];
        assert_eq!(
            compare(&ours, &changed, 0).mismatch(),
            Some(Mismatch::Changed(1))
        );
    }
}
