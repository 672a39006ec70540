//! A sliced job's GPU memory limit on this node: the slice library in the job's `bin/` (root's,
//! readable by all), the job's account beside it (the job user's, so its processes can book
//! into it), and the variables that preload the library into every process of the job.
//!
//! Everything lives in the attempt's directory, so nothing of it outlives the job. A job in a
//! container image cannot see that directory, so for it both files go into a private directory
//! in the host's `/tmp` instead ([`container_dir`]), which Charliecloud and Apptainer bind into
//! their containers by default; the attempt's directory records it, and it goes with the
//! attempt ([`remove_container_dir`]).

use crate::jobdir::JobDir;
use labpool_api::agent::Launch;
use std::collections::BTreeMap;
use std::io;

/// Sets the job up to be held to its slice, when it holds one; does nothing otherwise.
pub fn prepare(
    launch: &Launch,
    dir: &JobDir,
    env: &mut BTreeMap<String, String>,
) -> io::Result<()> {
    let Some(mib) = launch.slice_mib else {
        return Ok(());
    };
    let Some(gpu) = launch.gpus.first() else {
        return Ok(());
    };
    let failed = |e: labpool_gpu_slice::SliceError| {
        io::Error::other(format!(
            "job {}: its GPU slice of {mib} MiB could not be set up: {e}",
            launch.job
        ))
    };
    let (bin, home) = if in_container(launch) {
        let shared = container_dir(dir)?;
        (shared.clone(), shared)
    } else {
        (dir.path().join("bin"), dir.path().to_path_buf())
    };
    let library = labpool_gpu_slice::install(&bin).map_err(failed)?;
    let account = labpool_gpu_slice::Account::create(&home, mib).map_err(failed)?;
    if nix::unistd::geteuid().is_root() {
        nix::unistd::chown(
            &account,
            Some(nix::unistd::Uid::from_raw(launch.uid)),
            Some(nix::unistd::Gid::from_raw(launch.gid)),
        )?;
    }
    let own = env.get("LD_PRELOAD").cloned();
    for (k, v) in labpool_gpu_slice::environment(&library, &account, mib, *gpu, own.as_deref()) {
        env.insert(k, v);
    }
    Ok(())
}

/// True when the job runs inside a container image.
fn in_container(launch: &Launch) -> bool {
    launch
        .env
        .as_ref()
        .is_some_and(|e| e.kind == labpool_envs::EnvKind::Container)
}

/// The file in the attempt's directory that names its container slice directory.
const CONTAINER_DIR_RECORD: &str = "slice-dir";

/// The prefix of container slice directories in `/tmp`.
const CONTAINER_DIR_PREFIX: &str = "/tmp/labpool-slice-";

/// Makes a container job's slice directory: a fresh, randomly named one in `/tmp` (mkdtemp, so
/// nothing a member made there is used), readable by all and writable by its maker only, and
/// records it in the attempt's directory.
fn container_dir(dir: &JobDir) -> io::Result<std::path::PathBuf> {
    let made = nix::unistd::mkdtemp(format!("{CONTAINER_DIR_PREFIX}XXXXXX").as_str())?;
    std::fs::set_permissions(&made, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    std::fs::write(
        dir.path().join(CONTAINER_DIR_RECORD),
        made.as_os_str().as_encoded_bytes(),
    )?;
    Ok(made)
}

/// Removes the container slice directory the attempt's directory records, if any: only a real
/// directory (not a link) under the prefix, owned by this process's user.
pub fn remove_container_dir(attempt: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(named) = std::fs::read(attempt.join(CONTAINER_DIR_RECORD)) else {
        return;
    };
    let path = std::path::PathBuf::from(String::from_utf8_lossy(&named).into_owned());
    let ours = path.to_str().is_some_and(|p| {
        p.starts_with(CONTAINER_DIR_PREFIX) && !p[CONTAINER_DIR_PREFIX.len()..].contains('/')
    });
    let meta = std::fs::symlink_metadata(&path);
    match meta {
        Ok(m) if ours && m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw() => {
            if let Err(e) = std::fs::remove_dir_all(&path) {
                tracing::warn!(dir = %path.display(), "cannot remove a GPU slice directory: {e}");
            }
        }
        _ => {}
    }
}
