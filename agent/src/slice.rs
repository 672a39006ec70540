//! A sliced job's GPU memory limit on this node: the slice library in the job's `bin/` (root's,
//! readable by all), the job's account beside it (the job user's, so its processes can book
//! into it), and the variables that preload the library into every process of the job.
//!
//! Everything lives in the attempt's directory, so nothing of it outlives the job.

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
    let library = labpool_gpu_slice::install(&dir.path().join("bin")).map_err(failed)?;
    let account = labpool_gpu_slice::Account::create(dir.path(), mib).map_err(failed)?;
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
