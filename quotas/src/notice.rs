//! The purge notice a user finds in their home (`~/.labpool/purge-notice.txt`): which of their
//! scratch files go soon, and how to keep them.
//!
//! Written as root into a directory the user controls, so: the home must be owned by the user;
//! `.labpool` is opened without following a link; the text goes to a new file (`O_EXCL`) that
//! is then renamed over the old notice, so a planted link is replaced, never written through.

use crate::QuotaError;
use crate::purge::{Candidate, KEEP_MARKER, PurgePlan};
use labpool_units::format_size;
use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::{Mode, fstat, mkdirat};
use nix::unistd::{Gid, Uid, fchown};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The notice's file name under `~/.labpool`.
pub const NOTICE_FILE: &str = "purge-notice.txt";

/// The notice text for one user: files passing the limit soon, with the day each goes.
/// `day` formats seconds since the epoch as a date.
pub fn notice_text(plan: &PurgePlan, files: &[&Candidate], day: &dyn Fn(i64) -> String) -> String {
    let bytes: u64 = files.iter().map(|c| c.bytes).sum();
    let mut t = format!(
        "labpool: {} of your files in {} ({}) have not been used for {} days or more and will be\n\
         deleted from scratch on the day shown, unless they are used or changed before then.\n\
         To keep a directory, put an empty file named {KEEP_MARKER} in it; to keep results for\n\
         good, move them to your home or to a dataset.\n\n",
        files.len(),
        plan.root.display(),
        format_size(bytes),
        (plan.max_age_secs as i64 - plan.warn_secs as i64) / 86_400
    );
    for c in files {
        t.push_str(&format!(
            "{}  {:>6}  {}\n",
            day(plan.due(c)),
            format_size(c.bytes),
            plan.root.join(&c.path).display()
        ));
    }
    t
}

/// Writes `text` to `home/.labpool/purge-notice.txt` for `uid`, safely (see the module doc).
pub fn write_notice(home: &Path, uid: u32, gid: u32, text: &str) -> Result<PathBuf, QuotaError> {
    let io = |p: &Path, e: nix::errno::Errno| QuotaError::io(p, e);
    let home_fd: OwnedFd = nix::fcntl::open(
        home,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io(home, e))?;
    let st = fstat(&home_fd).map_err(|e| io(home, e))?;
    if st.st_uid != uid {
        return Err(QuotaError::NotADirectory {
            path: home.to_path_buf(),
            why: format!(
                "owned by uid {}, not by the notice's reader (uid {uid}); no notice written there",
                st.st_uid
            ),
        });
    }
    let dir = home.join(".labpool");
    let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let dir_fd = match openat(&home_fd, ".labpool", dir_flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) => {
            mkdirat(&home_fd, ".labpool", Mode::from_bits_truncate(0o755))
                .map_err(|e| io(&dir, e))?;
            let fd =
                openat(&home_fd, ".labpool", dir_flags, Mode::empty()).map_err(|e| io(&dir, e))?;
            fchown(&fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
                .map_err(|e| io(&dir, e))?;
            fd
        }
        Err(e) => return Err(io(&dir, e)),
    };
    let dst = fstat(&dir_fd).map_err(|e| io(&dir, e))?;
    if dst.st_uid != uid {
        return Err(QuotaError::NotADirectory {
            path: dir,
            why: format!(
                "owned by uid {}, not {uid}; no notice written there",
                dst.st_uid
            ),
        });
    }
    let tmp = format!(".{NOTICE_FILE}.{}.tmp", std::process::id());
    let _ = nix::unistd::unlinkat(
        &dir_fd,
        tmp.as_str(),
        nix::unistd::UnlinkatFlags::NoRemoveDir,
    );
    let fd = openat(
        &dir_fd,
        tmp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    )
    .map_err(|e| io(&dir.join(&tmp), e))?;
    fchown(&fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
        .map_err(|e| io(&dir.join(&tmp), e))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(text.as_bytes())
        .map_err(|e| QuotaError::io(dir.join(&tmp), e))?;
    drop(file);
    renameat(&dir_fd, tmp.as_str(), &dir_fd, NOTICE_FILE)
        .map_err(|e| io(&dir.join(NOTICE_FILE), e))?;
    Ok(dir.join(NOTICE_FILE))
}
