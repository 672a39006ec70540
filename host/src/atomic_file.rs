//! Files written whole or not at all, for every part of the binary that keeps state in files
//! (job directories, timer state, copy status).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes a file completely or not at all: a temporary file created with `mode`, then a rename.
/// When `durable`, the file is fsynced before the rename and the directory after it, so the
/// write also survives a power loss.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32, durable: bool) -> io::Result<()> {
    let dir = path.parent().expect("a file path has a parent");
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
    ));
    let _ = std::fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    f.write_all(bytes)?;
    if durable {
        f.sync_all()?;
    }
    drop(f);
    std::fs::rename(&tmp, path)?;
    if durable {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}
