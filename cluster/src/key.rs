//! The cluster key: 32 random bytes in a file (hex), mode 0600, the same on every node.

use crate::AuthError;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The shared secret of a pool's nodes.
#[derive(Clone)]
pub struct ClusterKey([u8; 32]);

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(..)")
    }
}

impl ClusterKey {
    /// A key from its bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> ClusterKey {
        ClusterKey(bytes)
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// A new random key (from the kernel's random source).
    pub fn generate() -> std::io::Result<ClusterKey> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
        Ok(ClusterKey(bytes))
    }

    /// Writes the key to `path` as hex, mode 0600; refuses to replace an existing file.
    pub fn write_new(&self, path: &Path) -> Result<(), AuthError> {
        let bad = |why: String| AuthError::KeyFile {
            path: path.to_path_buf(),
            why,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| bad(format!("cannot create it: {e}")))?;
        writeln!(f, "{}", hex::encode(self.0)).map_err(|e| bad(format!("cannot write it: {e}")))?;
        f.sync_all()
            .map_err(|e| bad(format!("cannot write it: {e}")))
    }

    /// Reads the key at `path`. The file must be readable by its owner only: a key others can
    /// read lets them act as any node.
    pub fn load(path: &Path) -> Result<ClusterKey, AuthError> {
        let bad = |why: String| AuthError::KeyFile {
            path: path.to_path_buf(),
            why,
        };
        use crate::secret_file::SecretFileError;
        let text = crate::read_owner_only(path, "anyone on this machine could act as a node")
            .map_err(|e| match e {
                SecretFileError::Missing(e) => bad(format!(
                    "cannot read it ({e}); copy the controller's cluster.key to this node"
                )),
                other => bad(other.to_string()),
            })?;
        ClusterKey::from_hex(&text).ok_or_else(|| {
            bad("it is not 64 hex digits; copy it again from the controller (labpool init writes it)".to_string())
        })
    }

    /// A key from the text of a key file (64 hex digits, surrounding white space ignored).
    pub fn from_hex(text: &str) -> Option<ClusterKey> {
        hex::decode(text.trim())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .map(ClusterKey)
    }
}
