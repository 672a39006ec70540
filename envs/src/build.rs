//! Building a locked environment at its fixed path.

use crate::tools::Tools;
use crate::{EnvError, EnvKind, Lock};
use std::io::Write;
use std::path::Path;

/// The file a complete build holds: the lock, as JSON, written last.
pub const MARKER: &str = ".labpool-env.json";

/// Builds `lock` into `dest`, an existing empty directory at the environment's final path.
/// Runs as the user who asked. Writes `dest/.labpool-env.json` (the lock) last. Tool output
/// goes to `log`; on failure the error names the step and the exit status, and `dest` may hold
/// a partial build (without the marker) for the caller to remove.
pub fn build(lock: &Lock, dest: &Path, tools: &Tools, log: &mut dyn Write) -> Result<(), EnvError> {
    check_dest(dest)?;
    crate::run::note(
        log,
        &format!(
            "building {} environment {} in {}",
            lock.kind,
            lock.id,
            dest.display()
        ),
    );
    match lock.kind {
        EnvKind::Venv => crate::venv::build(&lock.lock, dest, tools, log)?,
        EnvKind::Conda => crate::conda::build(&lock.lock, dest, tools, log)?,
        EnvKind::Container => crate::container::build(lock, dest)?,
        EnvKind::Modules => crate::modules::build(&lock.lock, dest)?,
    }
    write_marker(lock, dest)?;
    crate::run::note(log, &format!("built environment {}", lock.id));
    Ok(())
}

/// `dest` must be an empty directory owned by the user running the build.
fn check_dest(dest: &Path) -> Result<(), EnvError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dest).map_err(EnvError::io("build into", dest))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Err(EnvError::NotOwned {
            path: dest.to_path_buf(),
            owner: meta.uid(),
            uid,
        });
    }
    let mut entries = std::fs::read_dir(dest).map_err(EnvError::io("list", dest))?;
    if entries.next().is_some() {
        return Err(EnvError::NotEmpty {
            path: dest.to_path_buf(),
        });
    }
    Ok(())
}

/// Writes the marker through a temporary name, so it is there whole or not at all.
fn write_marker(lock: &Lock, dest: &Path) -> Result<(), EnvError> {
    let path = dest.join(MARKER);
    let tmp = dest.join(format!("{MARKER}.tmp"));
    let json = serde_json::to_vec_pretty(lock).expect("a Lock always serialises");
    let mut file = std::fs::File::create(&tmp).map_err(EnvError::io("create", &tmp))?;
    file.write_all(&json)
        .and_then(|()| file.sync_all())
        .map_err(EnvError::io("write", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(EnvError::io("rename into place", &path))
}
