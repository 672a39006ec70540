//! A job's place among its nodes, on the node that runs it: its leased ports
//! (`MASTER_ADDR`, `MASTER_PORT`), and for a multi-node job its node list and rank variables,
//! the private gang file `srun` reads, and an MPI hostfile. On a gang's other nodes the shim
//! runs the step launcher instead of the script (see [`crate::api::gang`]).

use crate::api::agent::Launch;
use crate::env_vars::{LABPOOL_GANG, LABPOOL_HOSTFILE, LABPOOL_PORTS};
use crate::jobdir::{JobDir, write_atomic};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// The name the step launcher is linked under in the job's `bin/`.
pub const STEP_HOST: &str = "labpool-step-host";

/// Writes the job's gang files and sets its variables in `env`; returns the step launcher to
/// run in place of the script on a gang's node other than the first.
pub fn prepare(
    launch: &Launch,
    dir: &JobDir,
    exe: &Path,
    env: &mut BTreeMap<String, String>,
) -> io::Result<Option<PathBuf>> {
    let mut set = |k: &str, v: String| {
        env.insert(k.to_string(), v);
    };
    let master = launch
        .gang
        .as_ref()
        .and_then(|g| g.nodes.first())
        .map_or_else(|| "127.0.0.1".to_string(), |n| n.host.clone());
    if let Some(p) = launch.ports {
        set(LABPOOL_PORTS, format!("{}-{}", p.first, p.end() - 1));
        set("MASTER_ADDR", master.clone());
        set("MASTER_PORT", p.first.to_string());
    }
    let hosts: Vec<(String, u32)> = match &launch.gang {
        Some(g) => g
            .nodes
            .iter()
            .zip(&g.tasks_per_node)
            .map(|(n, t)| (n.host.clone(), *t))
            .collect(),
        None => vec![(master, launch.ntasks)],
    };
    let hostfile: String = hosts
        .iter()
        .map(|(h, t)| format!("{h} slots={}\n", t.max(&1)))
        .collect();
    let hostfile_path = dir.user_dir().join("hostfile");
    write_private(&hostfile_path, hostfile.as_bytes(), 0o644, launch)?;
    set(LABPOOL_HOSTFILE, hostfile_path.display().to_string());
    let Some(gang) = &launch.gang else {
        set("SLURM_NODEID", "0".into());
        return Ok(None);
    };
    let n = gang.nodes.len().to_string();
    set("SLURM_JOB_NODELIST", gang.nodelist());
    set("SLURM_NODELIST", gang.nodelist());
    set("SLURM_JOB_NUM_NODES", n.clone());
    set("SLURM_NNODES", n);
    set("SLURM_NODEID", gang.index.to_string());
    set("SLURM_TASKS_PER_NODE", gang.tasks_per_node_text());
    let gang_path = dir.user_dir().join("gang.json");
    let bytes = serde_json::to_vec(gang).map_err(io::Error::other)?;
    write_private(&gang_path, &bytes, 0o600, launch)?;
    set(LABPOOL_GANG, gang_path.display().to_string());
    if gang.index == 0 {
        return Ok(None);
    }
    let link = dir.path().join("bin").join(STEP_HOST);
    std::os::unix::fs::symlink(exe, &link)?;
    Ok(Some(link))
}

/// Writes a file in the job's own corner, owned by its user.
fn write_private(path: &Path, bytes: &[u8], mode: u32, launch: &Launch) -> io::Result<()> {
    write_atomic(path, bytes, mode, false)?;
    if nix::unistd::geteuid().is_root() {
        nix::unistd::chown(
            path,
            Some(nix::unistd::Uid::from_raw(launch.uid)),
            Some(nix::unistd::Gid::from_raw(launch.gid)),
        )?;
    }
    Ok(())
}
