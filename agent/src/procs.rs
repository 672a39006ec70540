//! Finding a job's processes by what they carry, not by a number that may have been reused.
//!
//! Every process of a job inherits `LABPOOL_JOB_KEY` from its script, even one that left the
//! job's process group with `setsid`. The key is the attempt's spool directory, unique on the
//! machine even when several pools run on it (a demo beside a production pool), unlike a job
//! id. After a shim dies, or after a reboot when its recorded process group id may belong to
//! someone else, the agent kills exactly the processes that carry the key, and nothing else.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The environment variable that marks a job attempt's processes.
pub const JOB_KEY_VAR: &str = crate::env_vars::LABPOOL_JOB_KEY;

/// Every process that carries `key` (see [`JOB_KEY_VAR`]), the caller excepted.
pub fn job_processes(key: &str) -> Vec<Pid> {
    let wanted = format!("{JOB_KEY_VAR}={key}");
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == wanted.as_bytes())
        {
            found.push(Pid::from_raw(pid as i32));
        }
    }
    found
}

/// Sends `signal` to every process that carries `key` but those in `except`; returns how many.
pub fn signal_job_processes(key: &str, signal: Signal, except: &[Pid]) -> usize {
    job_processes(key)
        .into_iter()
        .filter(|p| !except.contains(p))
        .filter(|p| kill(*p, signal).is_ok())
        .count()
}

/// Sends `signal` to the tasks of a job's steps, as Slurm signals "the steps" (`--signal`
/// without `B:`, `scancel -s` without `-b`): every process that carries `key` but the batch
/// shell and labpool's own (`srun` and the step launchers), which must live on to relay their
/// tasks' output and exit codes, and, for a requeue, to see their tasks end. Returns how many.
pub fn signal_step_tasks(key: &str, signal: Signal, shell: Pid) -> usize {
    let labpool = std::fs::metadata("/proc/self/exe").ok();
    job_processes(key)
        .into_iter()
        .filter(|p| *p != shell)
        .filter(|p| !same_file(labpool.as_ref(), &format!("/proc/{p}/exe")) && !ours_by_name(*p))
        .filter(|p| kill(*p, signal).is_ok())
        .count()
}

/// Whether a process is one of labpool's by the name it runs under (`srun`, the step
/// launcher, `labpool`): after an upgrade a running `srun` is the old binary, whose inode is no
/// longer this one's.
fn ours_by_name(pid: Pid) -> bool {
    let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) else {
        return false;
    };
    let comm = comm.trim_end();
    // The kernel keeps 15 bytes of a name.
    let short = |name: &str| name.get(..name.len().min(15)).unwrap_or(name).to_string();
    comm == "srun" || comm == "labpool" || comm == short(crate::gang::STEP_HOST)
}

/// Whether `path` is the file `meta` describes (by device and inode).
fn same_file(meta: Option<&std::fs::Metadata>, path: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (meta, std::fs::metadata(path)) {
        (Some(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Sends SIGKILL to every process that carries `key` (see [`JOB_KEY_VAR`]); returns how many.
pub fn kill_job_processes(key: &str) -> usize {
    signal_job_processes(key, Signal::SIGKILL, &[])
}

/// At most this many open files of one process are looked at.
const MAX_FDS: usize = 65_536;

/// The processes among `pids` with one of the character devices `devices` (major, minor)
/// open, each with its name and the device: after a job's GPU state is checkpointed none of
/// its processes may still hold the card it lends.
pub fn holding_devices(pids: &[i32], devices: &[(u32, u32)]) -> Vec<(i32, String, (u32, u32))> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut found = Vec::new();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten().take(MAX_FDS) {
            let Ok(meta) = std::fs::metadata(fd.path()) else {
                continue;
            };
            if !meta.file_type().is_char_device() {
                continue;
            }
            let rdev = meta.rdev();
            let dev = (
                nix::sys::stat::major(rdev) as u32,
                nix::sys::stat::minor(rdev) as u32,
            );
            if devices.contains(&dev) {
                let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|c| c.trim_end().to_string())
                    .unwrap_or_default();
                found.push((*pid, name, dev));
                break;
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_process_holding_a_device_is_found_and_one_without_it_is_not() {
        let null = std::fs::File::open("/dev/null").unwrap();
        let me = std::process::id() as i32;
        let found = super::holding_devices(&[me], &[(1, 3)]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].2, (1, 3));
        assert!(super::holding_devices(&[me], &[(195, 0)]).is_empty());
        drop(null);
    }
}
