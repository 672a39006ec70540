//! A job's Hugging Face hub cache: `JOBDIR/hf/hub`, the job user's own and writable, holding a
//! link to each of its models as staged in this node's cache (read-only). `HF_HOME` and
//! `HF_HUB_CACHE` point there, so `from_pretrained("org/name")` and
//! `hf_hub_download(..., local_files_only=True)` find the staged weights with no network, and
//! whatever else the job downloads lands beside them and goes with the job.

use crate::api::agent::Launch;
use crate::jobdir::JobDir;
use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};

/// Makes the job's hub cache and sets its variables; nothing when it reads no model. The
/// variables replace any the member's own environment carried: they asked for these models.
pub fn prepare(
    launch: &Launch,
    dir: &JobDir,
    datasets: &[(String, PathBuf)],
    env: &mut BTreeMap<String, String>,
) -> io::Result<()> {
    if launch.models.is_empty() {
        return Ok(());
    }
    let home = dir.path().join("hf");
    let hub = home.join("hub");
    for d in [&home, &hub] {
        std::fs::DirBuilder::new().mode(0o700).create(d)?;
        if nix::unistd::geteuid().is_root() {
            nix::unistd::chown(
                d.as_path(),
                Some(nix::unistd::Uid::from_raw(launch.uid)),
                Some(nix::unistd::Gid::from_raw(launch.gid)),
            )?;
        }
    }
    for m in &launch.models {
        let mut parts = Path::new(&m.folder).components();
        let one_name = matches!(
            (parts.next(), parts.next()),
            (Some(Component::Normal(_)), None)
        );
        let staged = datasets.iter().find(|(name, _)| *name == m.dataset);
        let Some((_, staged)) = staged.filter(|_| one_name) else {
            return Err(io::Error::other(format!(
                "model {} ({}) is not among the job's staged datasets",
                m.repo, m.dataset
            )));
        };
        std::os::unix::fs::symlink(staged.join(&m.folder), hub.join(&m.folder))?;
    }
    let (home, hub) = (home.display().to_string(), hub.display().to_string());
    env.insert("HF_HOME".into(), home);
    env.insert("HF_HUB_CACHE".into(), hub.clone());
    // The name huggingface_hub read before 0.20, which older transformers still pass on.
    env.insert("HUGGINGFACE_HUB_CACHE".into(), hub);
    Ok(())
}
