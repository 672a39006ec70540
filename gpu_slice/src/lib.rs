//! GPU slices on the node: the library preloaded into a sliced job's processes, and the
//! account its processes share.
//!
//! A job that holds a slice of a card (`--gres=gpu:rtx4090.4:1`) may allocate at most the
//! slice's memory on it, however many processes it runs and whatever its framework calls. The
//! agent:
//! 1. writes [`LIBRARY`] into the job's directory ([`install`]) and makes the job's account
//!    there ([`Account::create`]), owned by the job's user;
//! 2. starts the job with [`environment`]: `LD_PRELOAD` names the library, and the account's
//!    path and the slice's size follow every child process and `srun` step of the job (they
//!    inherit the environment). A job in a container image gets both in a private directory in
//!    the host's `/tmp` instead, which Charliecloud and Apptainer bind into their containers.
//!
//! [`Account::read`] gives what the job holds and its peak, for tests and benchmarks.
//!
//! The library (`native/slice_shim.c`) wraps the CUDA driver's allocation calls (`cuMemAlloc`,
//! `cuMemAllocManaged`, `cuMemAllocPitch`, `cuMemAllocAsync`, `cuMemAllocFromPoolAsync`,
//! `cuMemCreate` and their frees), whether reached as symbols, through `dlsym` or through
//! `cuGetProcAddress`; and it shows the slice as the card's size to `cuMemGetInfo` and to
//! NVML's `nvmlDeviceGetMemoryInfo` (what `nvidia-smi`, `torch.cuda.mem_get_info` and
//! TensorFlow's allocator read). An allocation over the slice gets
//! `CUDA_ERROR_OUT_OF_MEMORY` in the process that asked; its neighbours run on.
//!
//! Why a library and not the kernel: Linux's device-memory cgroup controller (`dmem`, 6.14) is
//! the kernel's way to cap GPU memory per cgroup, but only DRM drivers register regions with it
//! (Intel's `xe`, AMD's); NVIDIA's CUDA driver registers none, so on the cards labs run CUDA on
//! there is nothing for the agent to set. Should a driver offer it, the agent would write the
//! slice to the job cgroup's `dmem.max` beside the library.
//!
//! What it cannot stop: a member who removes `LD_PRELOAD`, links the driver statically, or
//! calls the kernel driver's ioctls directly escapes the library. The backstop is the agents'
//! NVML sampling: the controller's monitor sees the job's processes' memory on the card, warns,
//! then kills a job found over its slice, and the job's record says why
//! (`labpool_monitor::slice_watch`).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The library, as built from `native/slice_shim.c` for this machine.
pub static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/liblabpool_slice.so"));

/// The library's file name in a job's directory.
pub const LIBRARY_NAME: &str = "liblabpool_slice.so";

/// The account's file name in a job's directory.
pub const ACCOUNT_NAME: &str = "gpu-slice.account";

/// The variable naming the job's account.
pub const ENV_ACCOUNT: &str = "LABPOOL_SLICE_ACCOUNT";
/// The variable giving the slice's memory, MiB: the limit of a process that cannot map the
/// account.
pub const ENV_LIMIT_MIB: &str = "LABPOOL_SLICE_LIMIT_MIB";
/// The variable naming the sliced card's NVML index, so that only it shows the slice.
pub const ENV_GPU: &str = "LABPOOL_SLICE_GPU";

/// The account's first eight bytes, as the library checks them.
const MAGIC: u64 = 0x3145_434c_5350_4c4c;
/// Process slots in an account: as `SLOTS` in the library.
const SLOTS: usize = 128;
/// The account's size: four counters, the slot count and its padding, and the slots.
const ACCOUNT_BYTES: usize = 4 * 8 + 8 + SLOTS * 16;

/// Why the slice could not be set up for a job.
#[derive(Debug, thiserror::Error)]
pub enum SliceError {
    /// A file in the job's directory could not be written or read.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The account file is not one the library wrote.
    #[error(
        "{0} is not a GPU slice account (wrong size or marker); the job's slice can no longer be read"
    )]
    NotAnAccount(PathBuf),
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> SliceError + 'a {
    move |source| SliceError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Writes the library into `dir` (a job's directory), readable by all, and returns its path.
/// A file already there is replaced, never followed.
pub fn install(dir: &Path) -> Result<PathBuf, SliceError> {
    let path = dir.join(LIBRARY_NAME);
    let tmp = dir.join(format!(".{LIBRARY_NAME}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(io("cannot write the GPU slice library to", &tmp))?;
    f.write_all(LIBRARY)
        .map_err(io("cannot write the GPU slice library to", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(io("cannot put the GPU slice library at", &path))?;
    Ok(path)
}

/// What a job's account says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// The slice's memory, bytes.
    pub limit: u64,
    /// What the job's processes hold now, bytes.
    pub used: u64,
    /// The most they held at once, bytes.
    pub peak: u64,
}

/// A job's account: the file its processes map to share one limit.
pub struct Account;

impl Account {
    /// Makes the account for a slice of `limit_mib` MiB at `dir`/[`ACCOUNT_NAME`], readable
    /// and writable by its owner only (the agent gives it to the job's user).
    pub fn create(dir: &Path, limit_mib: u64) -> Result<PathBuf, SliceError> {
        let path = dir.join(ACCOUNT_NAME);
        let mut bytes = vec![0u8; ACCOUNT_BYTES];
        bytes[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        bytes[8..16].copy_from_slice(&(limit_mib << 20).to_le_bytes());
        bytes[32..36].copy_from_slice(&(SLOTS as u32).to_le_bytes());
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(io("cannot make the GPU slice account", &path))?;
        f.write_all(&bytes)
            .map_err(io("cannot make the GPU slice account", &path))?;
        Ok(path)
    }

    /// Reads the account at `path`.
    pub fn read(path: &Path) -> Result<Usage, SliceError> {
        let mut f = File::open(path).map_err(io("cannot read the GPU slice account", path))?;
        let mut bytes = vec![0u8; ACCOUNT_BYTES];
        f.read_exact(&mut bytes)
            .map_err(|_| SliceError::NotAnAccount(path.to_path_buf()))?;
        let word = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
        if word(0) != MAGIC {
            return Err(SliceError::NotAnAccount(path.to_path_buf()));
        }
        Ok(Usage {
            limit: word(1),
            used: word(2),
            peak: word(3),
        })
    }
}

/// The variables a sliced job starts with: `LD_PRELOAD` with the library first (before what
/// the job had), the account, the limit and the card. `existing_preload` is the job's own
/// `LD_PRELOAD`, if any.
pub fn environment(
    library: &Path,
    account: &Path,
    limit_mib: u64,
    nvml_index: u32,
    existing_preload: Option<&str>,
) -> Vec<(String, String)> {
    let lib = library.display().to_string();
    let preload = match existing_preload.map(str::trim).filter(|p| !p.is_empty()) {
        Some(p) => format!("{lib}:{p}"),
        None => lib,
    };
    vec![
        ("LD_PRELOAD".to_string(), preload),
        (ENV_ACCOUNT.to_string(), account.display().to_string()),
        (ENV_LIMIT_MIB.to_string(), limit_mib.to_string()),
        (ENV_GPU.to_string(), nvml_index.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_reads_back_what_it_was_made_with() {
        let dir = tempfile::tempdir().unwrap();
        let path = Account::create(dir.path(), 6144).unwrap();
        assert_eq!(
            Account::read(&path).unwrap(),
            Usage {
                limit: 6144 << 20,
                used: 0,
                peak: 0
            }
        );
        // Never over a file that is already there.
        assert!(Account::create(dir.path(), 1).is_err());
        std::fs::write(&path, b"junk").unwrap();
        assert!(matches!(
            Account::read(&path),
            Err(SliceError::NotAnAccount(_))
        ));
    }

    #[test]
    fn the_library_goes_first_in_ld_preload() {
        let env = environment(
            Path::new("/j/lib.so"),
            Path::new("/j/acct"),
            100,
            3,
            Some("/opt/x.so"),
        );
        assert_eq!(env[0].1, "/j/lib.so:/opt/x.so");
        assert_eq!(env[3], ("LABPOOL_SLICE_GPU".to_string(), "3".to_string()));
        assert!(LIBRARY.starts_with(b"\x7fELF"));
    }
}
