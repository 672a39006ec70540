//! The job user's own corner of an attempt's directory (`user/`): its script, its `srun`
//! steps, its hostfile and gang file, the preemption notice. The job writes there, so it is
//! never on the node's state file system: as root the agent mounts a small tmpfs of its own
//! there, owned by the job's user and sized for the script plus [`ROOM`]. A job that fills it
//! fills only its own corner (its next `srun` cannot record a step); the pool's database, its
//! spool records and every other job's corner keep their room, and no quota is passed. The
//! corner is unmounted as soon as the job's end is read, which needs no room anywhere.
//!
//! Without root (a single-user pool, where every job is the agent's own user) the corner is a
//! plain directory.

use nix::mount::{MntFlags, MsFlags};
use std::io;
use std::path::Path;

/// What a corner holds beyond the script: steps, hostfile, gang file, notice, and what the
/// job writes there itself.
pub const ROOM: u64 = 16 << 20;

/// Most files a corner holds.
const INODES: u32 = 4096;

/// Makes `dir` (an empty directory) the corner of a job of `uid:gid` whose script is
/// `script_bytes` long, with `extra` bytes more (a job's hub cache): a tmpfs of its own as
/// root, else `dir` as it is. A tmpfs's pages count in the memory limit of the job that writes
/// them.
pub fn mount(dir: &Path, uid: u32, gid: u32, script_bytes: u64, extra: u64) -> io::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    // The wrapper an environment adds is written beside the script: room for it twice.
    let size = 2 * script_bytes + ROOM + extra;
    let options = format!("size={size},nr_inodes={INODES},mode=0700,uid={uid},gid={gid}");
    nix::mount::mount(
        Some("labpool-job"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(|e| {
        io::Error::other(format!(
            "cannot mount the job's own tmpfs at {} ({e}); the agent must run as root with mounts allowed",
            dir.display()
        ))
    })
}

/// Frees a corner: what the job wrote there is gone once its last open file is closed. A
/// directory that is not a mount point is left as it is.
pub fn release(dir: &Path) {
    match nix::mount::umount2(dir, MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => {}
        Err(nix::errno::Errno::EPERM) if !nix::unistd::geteuid().is_root() => {}
        Err(e) => tracing::warn!("cannot unmount the job corner {}: {e}", dir.display()),
    }
}
