//! Opening a file a member controls, as root: never through a link (it could name anyone's
//! file), never waiting on a FIFO or taking a terminal (it could hold the reader for ever). The
//! caller still checks what it got (a plain file, its owner) on the open descriptor.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `path` opened for reading with `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY`.
pub fn open_no_follow(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(
            (nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_NONBLOCK
                | nix::fcntl::OFlag::O_NOCTTY)
                .bits(),
        )
        .open(path)
}
