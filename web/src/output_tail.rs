//! The last lines of a job's output file, for its owner's page. The controller runs as root, so
//! it reads only a regular file that belongs to the job's owner, and never through a link: a
//! member cannot point `--output` at someone else's file and read it here.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// At most this much of the file's end is read.
const WINDOW: u64 = 64 * 1024;

/// Why no tail can be shown.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    /// Missing or unreadable.
    #[error("cannot read {path}: {why}")]
    Unreadable {
        /// The file.
        path: String,
        /// What the system said.
        why: String,
    },
    /// Someone else's file, or not a regular file (a link, a FIFO, a terminal).
    #[error("{path} is not a file of the job's owner (uid {owner}); it is not shown")]
    NotTheOwners {
        /// The file.
        path: String,
        /// The job's owner.
        owner: u32,
    },
}

/// The last `lines` lines of `path`, if it is a regular file owned by `owner`.
pub fn tail(path: &Path, owner: u32, lines: usize) -> Result<String, TailError> {
    let unreadable = |e: std::io::Error| TailError::Unreadable {
        path: path.display().to_string(),
        why: e.to_string(),
    };
    // Look before opening: a terminal or a FIFO named as --output is never opened as root.
    let before = std::fs::symlink_metadata(path).map_err(unreadable)?;
    if !before.is_file() || before.uid() != owner {
        return Err(TailError::NotTheOwners {
            path: path.display().to_string(),
            owner,
        });
    }
    let mut f = crate::member_file::open_no_follow(path).map_err(unreadable)?;
    let meta = f.metadata().map_err(unreadable)?;
    if !meta.is_file()
        || meta.uid() != owner
        || (meta.dev(), meta.ino()) != (before.dev(), before.ino())
    {
        return Err(TailError::NotTheOwners {
            path: path.display().to_string(),
            owner,
        });
    }
    let start = meta.len().saturating_sub(WINDOW);
    f.seek(SeekFrom::Start(start)).map_err(unreadable)?;
    let mut buf = Vec::new();
    f.take(WINDOW).read_to_end(&mut buf).map_err(unreadable)?;
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    // A window that starts mid-file starts mid-line: drop that partial first line.
    let skip = usize::from(start > 0 && all.len() > 1);
    let from = all.len().saturating_sub(lines).max(skip);
    Ok(all[from..].join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_owners_file_and_not_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("slurm-1.out");
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&out, text).unwrap();
        let me = nix::unistd::geteuid().as_raw();
        assert_eq!(tail(&out, me, 3).unwrap(), "line 98\nline 99\nline 100");
        assert!(matches!(
            tail(&out, me + 1, 3),
            Err(TailError::NotTheOwners { .. })
        ));
        let link = dir.path().join("link.out");
        std::os::unix::fs::symlink(&out, &link).unwrap();
        assert!(matches!(
            tail(&link, me, 3),
            Err(TailError::NotTheOwners { .. })
        ));
        let fifo = dir.path().join("fifo.out");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(
            tail(&fifo, me, 3),
            Err(TailError::NotTheOwners { .. })
        ));
        assert!(matches!(
            tail(Path::new("/dev/tty"), me, 3),
            Err(TailError::NotTheOwners { .. } | TailError::Unreadable { .. })
        ));
        let big = dir.path().join("big.out");
        std::fs::write(&big, "x".repeat(200_000) + "\nlast\n").unwrap();
        assert_eq!(tail(&big, me, 5).unwrap(), "last");
    }
}
