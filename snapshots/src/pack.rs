//! Packs: files of about 32 MiB holding many stored blobs, followed by a trailer that lists them,
//! so the index can always be rebuilt from the packs alone.
//!
//! Layout: `blob bytes … | entry × n | n: u32 LE | "LPPACK01"`, each entry
//! `kind u8 | compressed u8 | id [32] | offset u32 | stored_len u32 | raw_len u32` (all LE).
//! A pack is named by the BLAKE3 of its whole content and lives at `packs/XY/<hex>`.
//! It is written to `packs/tmp/`, fsynced, renamed into place, and the directory is fsynced,
//! so a pack is either whole under its name or absent.

use crate::blob::{BlobId, BlobKind};
use crate::error::{Result, SnapshotError};
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The size at which a pack is closed.
pub const PACK_TARGET: usize = 32 << 20;
const MAGIC: &[u8; 8] = b"LPPACK01";
const ENTRY_LEN: usize = 1 + 1 + 32 + 4 + 4 + 4;

/// Where one blob lies in a pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackEntry {
    /// Data or tree.
    pub kind: BlobKind,
    /// The blob's id.
    pub id: BlobId,
    /// Byte offset in the pack.
    pub offset: u32,
    /// Stored length.
    pub stored_len: u32,
    /// Length once decoded.
    pub raw_len: u32,
    /// zstd or raw.
    pub compressed: bool,
}

/// A pack being filled in memory.
#[derive(Default)]
pub struct PackBuilder {
    buf: Vec<u8>,
    entries: Vec<PackEntry>,
}

/// A pack written to disk.
#[derive(Debug)]
pub struct WrittenPack {
    /// Its name (hex BLAKE3 of the file).
    pub id: String,
    /// Its size in bytes.
    pub size: u64,
    /// What it holds.
    pub entries: Vec<PackEntry>,
}

impl PackBuilder {
    /// Appends a stored blob.
    pub fn add(
        &mut self,
        kind: BlobKind,
        id: BlobId,
        raw_len: usize,
        stored: &[u8],
        compressed: bool,
    ) {
        let offset = self.buf.len() as u32;
        self.buf.extend_from_slice(stored);
        self.entries.push(PackEntry {
            kind,
            id,
            offset,
            stored_len: stored.len() as u32,
            raw_len: raw_len as u32,
            compressed,
        });
    }

    /// Whether the pack has reached its target size.
    pub fn is_full(&self) -> bool {
        self.buf.len() >= PACK_TARGET
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of blob data so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Writes the pack durably under `packs_dir` and returns what it holds.
    pub fn write(mut self, packs_dir: &Path) -> Result<WrittenPack> {
        for e in &self.entries {
            self.buf.push(e.kind.code());
            self.buf.push(e.compressed as u8);
            self.buf.extend_from_slice(&e.id.0);
            self.buf.extend_from_slice(&e.offset.to_le_bytes());
            self.buf.extend_from_slice(&e.stored_len.to_le_bytes());
            self.buf.extend_from_slice(&e.raw_len.to_le_bytes());
        }
        self.buf
            .extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(MAGIC);
        let id = blake3::hash(&self.buf).to_hex().to_string();
        let tmp_dir = packs_dir.join("tmp");
        fs::create_dir_all(&tmp_dir).map_err(SnapshotError::io("create", &tmp_dir))?;
        let tmp = tmp_dir.join(format!("{id}.tmp"));
        let mut f = File::create(&tmp).map_err(SnapshotError::io("create", &tmp))?;
        f.write_all(&self.buf)
            .map_err(SnapshotError::io("write", &tmp))?;
        f.sync_all().map_err(SnapshotError::io("fsync", &tmp))?;
        drop(f);
        let dest = pack_path(packs_dir, &id);
        let sub = dest.parent().expect("pack path has a parent");
        if !sub.exists() {
            fs::create_dir_all(sub).map_err(SnapshotError::io("create", sub))?;
            sync_dir(packs_dir)?;
        }
        fs::rename(&tmp, &dest).map_err(SnapshotError::io("rename", &dest))?;
        sync_dir(sub)?;
        Ok(WrittenPack {
            id,
            size: self.buf.len() as u64,
            entries: self.entries,
        })
    }
}

/// Where the pack named `id` lives.
pub fn pack_path(packs_dir: &Path, id: &str) -> PathBuf {
    packs_dir.join(&id[..2.min(id.len())]).join(id)
}

/// fsyncs a directory, so that a rename or create in it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(SnapshotError::io("fsync", dir))
}

/// Reads and parses a pack's trailer.
pub fn read_trailer(file: &File, id: &str) -> Result<Vec<PackEntry>> {
    let corrupt = |what: String| SnapshotError::Corrupt {
        pack: id.to_string(),
        what,
    };
    let size = file
        .metadata()
        .map_err(|e| corrupt(format!("cannot stat: {e}")))?
        .len();
    let foot = foot_of(size, id, |buf, at| {
        file.read_exact_at(buf, at)
            .map_err(|e| corrupt(format!("cannot read the trailer: {e}")))
    })?;
    let table = trailer_len(&foot, size, id)?;
    let mut buf = vec![0u8; table as usize];
    file.read_exact_at(&mut buf, size - 12 - table)
        .map_err(|e| corrupt(format!("cannot read the trailer: {e}")))?;
    decode_table(&buf, size - 12 - table, id)
}

/// Parses the trailer of a whole pack held in memory (what [`read_trailer`] reads from a file).
pub fn parse_trailer(pack: &[u8], id: &str) -> Result<Vec<PackEntry>> {
    let size = pack.len() as u64;
    let foot = foot_of(size, id, |buf, at| {
        buf.copy_from_slice(&pack[at as usize..at as usize + buf.len()]);
        Ok(())
    })?;
    let table = trailer_len(&foot, size, id)?;
    let start = (size - 12 - table) as usize;
    decode_table(&pack[start..start + table as usize], start as u64, id)
}

/// The last 12 bytes of a pack of `size` bytes, read with `read`.
fn foot_of(
    size: u64,
    id: &str,
    read: impl FnOnce(&mut [u8], u64) -> Result<()>,
) -> Result<[u8; 12]> {
    if size < 12 {
        return Err(SnapshotError::Corrupt {
            pack: id.to_string(),
            what: format!("only {size} bytes long"),
        });
    }
    let mut foot = [0u8; 12];
    read(&mut foot, size - 12)?;
    Ok(foot)
}

/// The length of the entry table the foot announces, checked against the pack's size.
fn trailer_len(foot: &[u8; 12], size: u64, id: &str) -> Result<u64> {
    let corrupt = |what: String| SnapshotError::Corrupt {
        pack: id.to_string(),
        what,
    };
    if &foot[4..] != MAGIC {
        return Err(corrupt("no pack trailer magic at its end".into()));
    }
    let n = u32::from_le_bytes(foot[..4].try_into().unwrap()) as u64;
    let table = n * ENTRY_LEN as u64;
    if table + 12 > size {
        return Err(corrupt(format!(
            "trailer claims {n} blobs, more than fit in {size} bytes"
        )));
    }
    Ok(table)
}

/// The entries of a trailer table, each checked to lie within the first `data_end` bytes.
fn decode_table(buf: &[u8], data_end: u64, id: &str) -> Result<Vec<PackEntry>> {
    let corrupt = |what: String| SnapshotError::Corrupt {
        pack: id.to_string(),
        what,
    };
    buf.chunks_exact(ENTRY_LEN)
        .map(|e| {
            let kind = BlobKind::from_code(e[0])
                .ok_or_else(|| corrupt(format!("unknown blob kind {}", e[0])))?;
            let entry = PackEntry {
                kind,
                compressed: e[1] != 0,
                id: BlobId(e[2..34].try_into().unwrap()),
                offset: u32::from_le_bytes(e[34..38].try_into().unwrap()),
                stored_len: u32::from_le_bytes(e[38..42].try_into().unwrap()),
                raw_len: u32::from_le_bytes(e[42..46].try_into().unwrap()),
            };
            if entry.offset as u64 + entry.stored_len as u64 > data_end {
                return Err(corrupt(format!(
                    "blob {} lies past the data",
                    entry.id.hex()
                )));
            }
            Ok(entry)
        })
        .collect()
}

/// Reads one blob from an open pack, decodes it and checks its hash.
pub fn read_blob(file: &File, pack: &str, e: &PackEntry) -> Result<Vec<u8>> {
    let mut stored = vec![0u8; e.stored_len as usize];
    file.read_exact_at(&mut stored, e.offset as u64)
        .map_err(|err| SnapshotError::Corrupt {
            pack: pack.to_string(),
            what: format!(
                "cannot read blob {} at offset {}: {err}",
                e.id.hex(),
                e.offset
            ),
        })?;
    decode_checked(&stored, pack, e)
}

/// Decodes stored bytes and checks they hash to the entry's id.
pub fn decode_checked(stored: &[u8], pack: &str, e: &PackEntry) -> Result<Vec<u8>> {
    let data = crate::blob::decode(stored, e.compressed, e.raw_len as usize).map_err(|err| {
        SnapshotError::Corrupt {
            pack: pack.to_string(),
            what: format!("blob {} does not decompress: {err}", e.id.hex()),
        }
    })?;
    if data.len() != e.raw_len as usize || BlobId::of(&data) != e.id {
        return Err(SnapshotError::Corrupt {
            pack: pack.to_string(),
            what: format!("blob {} does not match its hash", e.id.hex()),
        });
    }
    Ok(data)
}
