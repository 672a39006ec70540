//! The index (SQLite): where each blob lies, which packs exist, and the snapshot records. It is
//! derived data: every row can be rebuilt from the packs' trailers and the snapshot files.

use crate::blob::{BlobId, BlobKind};
use crate::error::{Result, SnapshotError};
use crate::pack::{PackEntry, WrittenPack};
use crate::snapshot::Snapshot;
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The open index.
pub struct Index {
    conn: Connection,
    path: PathBuf,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS packs (id TEXT PRIMARY KEY, size INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (
    id BLOB PRIMARY KEY, kind INTEGER NOT NULL, pack TEXT NOT NULL, offset INTEGER NOT NULL,
    stored_len INTEGER NOT NULL, raw_len INTEGER NOT NULL, compressed INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS blobs_by_pack ON blobs(pack);
CREATE TABLE IF NOT EXISTS snapshots (
    id TEXT PRIMARY KEY, time TEXT NOT NULL, source TEXT NOT NULL, record TEXT NOT NULL
);
";

impl Index {
    /// Opens (creating if needed) the index at `path`.
    pub fn open(path: &Path) -> Result<Index> {
        let err = |source| SnapshotError::Index {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(Index {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> SnapshotError + '_ {
        |source| SnapshotError::Index {
            path: self.path.clone(),
            source,
        }
    }

    /// Where blob `id` lies, if the repository has it.
    pub fn lookup(&self, id: &BlobId) -> Result<Option<(String, PackEntry)>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT kind, pack, offset, stored_len, raw_len, compressed FROM blobs WHERE id = ?1",
            )
            .map_err(self.err())?;
        st.query_row(params![&id.0[..]], |r| {
            let kind: u8 = r.get(0)?;
            Ok((
                r.get::<_, String>(1)?,
                PackEntry {
                    kind: BlobKind::from_code(kind).unwrap_or(BlobKind::Data),
                    id: *id,
                    offset: r.get(2)?,
                    stored_len: r.get(3)?,
                    raw_len: r.get(4)?,
                    compressed: r.get(5)?,
                },
            ))
        })
        .optional()
        .map_err(self.err())
    }

    /// Records written packs and, last, the snapshot that needs them, in one transaction: the
    /// commit point of a backup.
    pub fn commit(&mut self, packs: &[WrittenPack], snapshot: Option<&Snapshot>) -> Result<()> {
        let path = self.path.clone();
        let err = move |source| SnapshotError::Index {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(&err)?;
        insert_packs(&tx, packs, Placement::KeepFirst).map_err(&err)?;
        if let Some(s) = snapshot {
            tx.execute(
                "INSERT OR REPLACE INTO snapshots (id, time, source, record) VALUES (?1, ?2, ?3, ?4)",
                params![s.id, s.time.to_rfc3339(), s.source, serde_json::to_string(s).unwrap()],
            )
            .map_err(&err)?;
        }
        tx.commit().map_err(&err)
    }

    /// Every pack the index knows, with its size.
    pub fn packs(&self) -> Result<BTreeMap<String, u64>> {
        let mut st = self
            .conn
            .prepare("SELECT id, size FROM packs")
            .map_err(self.err())?;
        let rows = st
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
            })
            .map_err(self.err())?;
        rows.collect::<Result<_, _>>().map_err(self.err())
    }

    /// Every blob in pack `id`.
    pub fn blobs_in(&self, pack: &str) -> Result<Vec<PackEntry>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT id, kind, offset, stored_len, raw_len, compressed FROM blobs WHERE pack = ?1",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map(params![pack], |r| {
                let id: Vec<u8> = r.get(0)?;
                let kind: u8 = r.get(1)?;
                Ok(PackEntry {
                    id: BlobId(id.try_into().unwrap_or([0; 32])),
                    kind: BlobKind::from_code(kind).unwrap_or(BlobKind::Data),
                    offset: r.get(2)?,
                    stored_len: r.get(3)?,
                    raw_len: r.get(4)?,
                    compressed: r.get(5)?,
                })
            })
            .map_err(self.err())?;
        rows.collect::<Result<_, _>>().map_err(self.err())
    }

    /// Number of blobs and their stored bytes.
    pub fn blob_totals(&self) -> Result<(u64, u64)> {
        self.conn
            .query_row(
                "SELECT count(*), coalesce(sum(stored_len), 0) FROM blobs",
                [],
                |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
            )
            .map_err(self.err())
    }

    /// Every snapshot record, oldest first.
    pub fn snapshots(&self) -> Result<Vec<Snapshot>> {
        let mut st = self
            .conn
            .prepare("SELECT record FROM snapshots ORDER BY time, id")
            .map_err(self.err())?;
        let rows = st
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(self.err())?;
        let mut out = Vec::new();
        for row in rows {
            let json = row.map_err(self.err())?;
            if let Ok(s) = serde_json::from_str(&json) {
                out.push(s);
            }
        }
        Ok(out)
    }

    /// Removes snapshot records.
    pub fn remove_snapshots(&mut self, ids: &[String]) -> Result<()> {
        let path = self.path.clone();
        let err = move |source| SnapshotError::Index {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(&err)?;
        for id in ids {
            tx.execute("DELETE FROM snapshots WHERE id = ?1", params![id])
                .map_err(&err)?;
        }
        tx.commit().map_err(&err)
    }

    /// Replaces packs: `added` packs' blobs take over their locations, then `removed` packs and
    /// the blobs still pointing into them are dropped. One transaction (prune's commit point).
    pub fn replace_packs(&mut self, added: &[WrittenPack], removed: &[String]) -> Result<()> {
        let path = self.path.clone();
        let err = move |source| SnapshotError::Index {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(&err)?;
        insert_packs(&tx, added, Placement::Move).map_err(&err)?;
        for id in removed {
            tx.execute("DELETE FROM blobs WHERE pack = ?1", params![id])
                .map_err(&err)?;
            tx.execute("DELETE FROM packs WHERE id = ?1", params![id])
                .map_err(&err)?;
        }
        tx.commit().map_err(&err)
    }

    /// Drops every row (before a rebuild from the packs).
    pub fn clear(&mut self) -> Result<()> {
        self.conn
            .execute_batch("DELETE FROM blobs; DELETE FROM packs; DELETE FROM snapshots;")
            .map_err(self.err())
    }
}

/// Which location wins when a blob is already indexed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// A backup or a reconcile: the existing location stays.
    KeepFirst,
    /// A prune moving live blobs: the new pack's location replaces the old.
    Move,
}

fn insert_packs(
    tx: &rusqlite::Transaction<'_>,
    packs: &[WrittenPack],
    placement: Placement,
) -> rusqlite::Result<()> {
    let mut pack_st =
        tx.prepare_cached("INSERT OR REPLACE INTO packs (id, size) VALUES (?1, ?2)")?;
    let verb = match placement {
        Placement::KeepFirst => "INSERT OR IGNORE",
        Placement::Move => "INSERT OR REPLACE",
    };
    let mut blob_st = tx.prepare_cached(&format!(
        "{verb} INTO blobs (id, kind, pack, offset, stored_len, raw_len, compressed)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
    ))?;
    for p in packs {
        pack_st.execute(params![p.id, p.size as i64])?;
        for e in &p.entries {
            blob_st.execute(params![
                &e.id.0[..],
                e.kind.code(),
                p.id,
                e.offset,
                e.stored_len,
                e.raw_len,
                e.compressed
            ])?;
        }
    }
    Ok(())
}
