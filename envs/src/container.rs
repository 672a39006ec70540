//! Container images: a SIF (run with apptainer) or a SquashFS (run with Charliecloud's ch-run).
//!
//! The lock is the image's BLAKE3 and file name; the build copies the image into the
//! environment directory, hashing as it copies, so a job never runs an image other than the one
//! locked.

use crate::kind::{ImageFormat, image_format};
use crate::{EnvError, Lock};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Locks the image at `path`: the lock text `blake3:<hex> <file name>\n` and the image's
/// canonical path.
pub(crate) fn lock(path: &Path) -> Result<(String, PathBuf), EnvError> {
    let (mut file, _) = open(path)?;
    let hash = copy_hashing(&mut file, &mut std::io::sink(), path)?;
    let canonical = path
        .canonicalize()
        .map_err(|source| EnvError::ImageMissing {
            path: path.to_path_buf(),
            source,
        })?;
    let name = canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((format!("blake3:{hash} {name}\n"), canonical))
}

/// Copies the locked image into `dest` as `image.sif` or `image.sqfs`, checking its hash;
/// on a mismatch the copy is removed.
pub(crate) fn build(lock: &Lock, dest: &Path) -> Result<(), EnvError> {
    let bad_lock = |why: &str| EnvError::BadLock {
        id: lock.id.clone(),
        why: why.to_string(),
    };
    let source = lock
        .image
        .as_deref()
        .ok_or_else(|| bad_lock("it names no image file"))?;
    let expected =
        locked_hash(lock).ok_or_else(|| bad_lock("its text is not `blake3:<hash> <name>`"))?;
    let (mut file, format) = open(source)?;
    let target = dest.join(format.file_name());
    let mut out = File::create(&target).map_err(EnvError::io("create", &target))?;
    let actual = copy_hashing(&mut file, &mut out, source).and_then(|hash| {
        out.sync_all()
            .map(|()| hash)
            .map_err(EnvError::io("write", &target))
    });
    let mismatch = match actual {
        Ok(actual) if actual == expected => return Ok(()),
        Ok(actual) => EnvError::HashMismatch {
            path: source.to_path_buf(),
            expected: expected.to_string(),
            actual,
        },
        Err(e) => e,
    };
    drop(out);
    let _ = std::fs::remove_file(&target);
    Err(mismatch)
}

/// The image inside a built environment directory, and its format.
pub(crate) fn built_image(dir: &Path) -> Result<(PathBuf, ImageFormat), EnvError> {
    for format in [ImageFormat::Squashfs, ImageFormat::Sif] {
        let path = dir.join(format.file_name());
        if path.is_file() {
            return Ok((path, format));
        }
    }
    let path = dir.join("image.sqfs");
    Err(EnvError::ImageMissing {
        path,
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the environment holds neither image.sqfs nor image.sif; build it again",
        ),
    })
}

/// The image hash a container lock names (`blake3:<hash> <name>`), if it is well formed.
pub(crate) fn locked_hash(lock: &Lock) -> Option<&str> {
    lock.lock
        .strip_prefix("blake3:")
        .and_then(|rest| rest.split_whitespace().next())
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The BLAKE3 hex of the file at `path`.
pub(crate) fn hash_file(path: &Path) -> Result<String, EnvError> {
    let mut file = File::open(path).map_err(EnvError::io("open", path))?;
    copy_hashing(&mut file, &mut std::io::sink(), path)
}

/// Opens `path` and checks it is an image.
fn open(path: &Path) -> Result<(File, ImageFormat), EnvError> {
    let missing = |source| EnvError::ImageMissing {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(missing)?;
    let mut head = [0u8; 64];
    let mut len = 0;
    while len < head.len() {
        match file.read(&mut head[len..]).map_err(missing)? {
            0 => break,
            n => len += n,
        }
    }
    let format = image_format(&head[..len]).ok_or_else(|| EnvError::NotAnImage {
        path: path.to_path_buf(),
    })?;
    // Back to the start, so the hash covers the whole file.
    file.rewind().map_err(missing)?;
    Ok((file, format))
}

/// Copies `from` into `to`, returning the BLAKE3 hex of what was copied.
fn copy_hashing(from: &mut File, to: &mut dyn Write, path: &Path) -> Result<String, EnvError> {
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(EnvError::io("read", path)(e)),
        };
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n])
            .map_err(EnvError::io("write a copy of", path))?;
    }
    Ok(hasher.finalize().to_hex().to_string())
}
