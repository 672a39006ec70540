//! A secret kept in a file that only its owner may read: the cluster key, and the other keys a
//! node holds (a chat bot's webhook URL, an object store's secret key). One check for all of
//! them, so a secret others can read is refused the same way everywhere.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a secret file was not read.
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    /// It is not there, or cannot be looked at.
    #[error("cannot read it ({0})")]
    Missing(std::io::Error),
    /// Others than its owner may read it.
    #[error("it is readable by others (mode {mode:o}), so {risk}; chmod 600 {}", path.display())]
    Open {
        /// Its permission bits.
        mode: u32,
        /// What anyone who could read it could do.
        risk: String,
        /// The file.
        path: PathBuf,
    },
    /// It could not be read.
    #[error("cannot read it: {0}")]
    Read(std::io::Error),
}

/// The text of the secret file at `path`, once it is readable by its owner only. `risk` says
/// what anyone who could read it could do, for the error: `anyone on this machine could act as
/// a node`.
pub fn read_owner_only(path: &Path, risk: &str) -> Result<String, SecretFileError> {
    let meta = std::fs::metadata(path).map_err(SecretFileError::Missing)?;
    if meta.mode() & 0o077 != 0 {
        return Err(SecretFileError::Open {
            mode: meta.mode() & 0o777,
            risk: risk.to_string(),
            path: path.to_path_buf(),
        });
    }
    std::fs::read_to_string(path).map_err(SecretFileError::Read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_secret_others_can_read_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        std::fs::write(&path, "k\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = read_owner_only(&path, "they could post")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mode 640), so they could post; chmod 600"),
            "{e}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_owner_only(&path, "x").unwrap(), "k\n");
    }
}
