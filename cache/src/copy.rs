//! Copying one file: hashed while copied, written to `.partial`, synced, then renamed, so a
//! crash never leaves a half file under the final name.

use crate::error::CacheError;
pub use crate::layout::{PARTIAL_SUFFIX, partial_path};
use crate::manifest::Entry;
use nix::sys::stat::{UtimensatFlags, utimensat};
use nix::sys::time::TimeSpec;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Caps the bytes per second that all workers read together (to spare a shared file server).
pub struct Limiter {
    rate: Option<f64>,
    state: Mutex<(Instant, f64)>,
}

impl Limiter {
    /// A limiter at `bytes_per_s`, or none.
    pub fn new(bytes_per_s: Option<u64>) -> Limiter {
        Limiter {
            rate: bytes_per_s.map(|r| r.max(1) as f64),
            state: Mutex::new((Instant::now(), 0.0)),
        }
    }

    /// Waits until `n` more bytes may be read.
    pub fn take(&self, n: usize) {
        let Some(rate) = self.rate else { return };
        let wait = {
            let mut s = self.state.lock().expect("not poisoned");
            let now = Instant::now();
            // Tokens accrue at `rate`, at most one second's worth.
            let (last, tokens) = *s;
            let tokens =
                (tokens + now.duration_since(last).as_secs_f64() * rate).min(rate) - n as f64;
            *s = (now, tokens);
            if tokens < 0.0 {
                Duration::from_secs_f64(-tokens / rate)
            } else {
                Duration::ZERO
            }
        };
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

const CHUNK: usize = 1 << 20;

thread_local! {
    static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Copies `src` to `dst` through `dst.partial`: hashes while copying, gives the copy the entry's
/// mode and mtime, syncs it, then renames it into place. Checks that the source still matches
/// the entry. Returns the BLAKE3 hash.
pub fn copy_file(
    src: &Path,
    dst: &Path,
    entry: &Entry,
    limiter: &Limiter,
) -> Result<String, CacheError> {
    let (file, partial, hash) = write_partial(src, dst, entry, limiter)?;
    file.sync_all().map_err(|e| CacheError::io(&partial, e))?;
    drop(file);
    std::fs::rename(&partial, dst).map_err(|e| CacheError::io(dst, e))?;
    Ok(hash)
}

/// The first half of [`copy_file`]: writes `dst.partial` (hashed, with the entry's mode and
/// mtime) and returns it open, not yet synced or renamed, with its path and hash. A stager
/// syncs many such files at once, then renames them.
pub fn write_partial(
    src: &Path,
    dst: &Path,
    entry: &Entry,
    limiter: &Limiter,
) -> Result<(File, std::path::PathBuf, String), CacheError> {
    let mut input = File::open(src).map_err(|e| CacheError::io(src, e))?;
    let meta = input.metadata().map_err(|e| CacheError::io(src, e))?;
    let changed = || CacheError::SourceChanged {
        path: src.to_path_buf(),
        expected: format!("{} bytes, mtime {} ns", entry.size, entry.mtime_ns),
    };
    let before = crate::manifest::entry_of(src, entry.path.clone(), &meta)?;
    if !before.same_metadata(entry) {
        return Err(changed());
    }
    let (mut out, partial) = create_partial(dst)?;
    let mut hasher = blake3::Hasher::new();
    let mut copied = 0u64;
    BUFFER.with_borrow_mut(|buf| -> Result<(), CacheError> {
        // One buffer per copying thread: most dataset files are small, and a fresh 1 MiB
        // buffer per file would cost more than the file.
        buf.resize(CHUNK, 0);
        loop {
            let n = input.read(buf).map_err(|e| CacheError::io(src, e))?;
            if n == 0 {
                return Ok(());
            }
            limiter.take(n);
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])
                .map_err(|e| CacheError::io(&partial, e))?;
            copied += n as u64;
        }
    })?;
    // Rewritten while it was read (same size or not): what was copied is no version.
    let after = input.metadata().map_err(|e| CacheError::io(src, e))?;
    let after = crate::manifest::entry_of(src, entry.path.clone(), &after)?;
    if copied != entry.size || !after.same_metadata(entry) {
        let _ = std::fs::remove_file(&partial);
        return Err(changed());
    }
    out.set_permissions(std::fs::Permissions::from_mode(entry.mode))
        .map_err(|e| CacheError::io(&partial, e))?;
    set_mtime(&partial, entry.mtime_ns)?;
    Ok((out, partial, hasher.finalize().to_hex().to_string()))
}

/// Opens `dst`'s `.partial` for a new copy: private (0600) until it gets the entry's mode.
pub fn create_partial(dst: &Path) -> Result<(File, std::path::PathBuf), CacheError> {
    let partial = partial_path(dst);
    let out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)
        .map_err(|e| CacheError::io(&partial, e))?;
    Ok((out, partial))
}

/// Sets a path's mtime (and atime) to `ns`, not following a final symlink.
pub fn set_mtime(path: &Path, ns: i64) -> Result<(), CacheError> {
    let t = TimeSpec::new(ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &t,
        &t,
        UtimensatFlags::NoFollowSymlink,
    )
    .map_err(|e| CacheError::io(path, e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_paces_reads() {
        let l = Limiter::new(Some(10_000_000));
        let t0 = Instant::now();
        for _ in 0..3 {
            l.take(1_000_000);
        }
        // 3 MB at 10 MB/s.
        assert!(
            t0.elapsed() >= Duration::from_millis(290),
            "{:?}",
            t0.elapsed()
        );
        let free = Limiter::new(None);
        let t0 = Instant::now();
        free.take(usize::MAX);
        assert!(t0.elapsed() < Duration::from_millis(50));
    }
}
