//! Delta transfer of one file from a peer that has its new version, to a node that has an older
//! one: the receiver sends an rsync signature of its old file, the peer answers with a delta
//! (`fast_rsync`), the receiver applies it and checks the result against the manifest's BLAKE3.
//!
//! Decisions recorded here:
//! - `fast_rsync` signatures are MD4, which is not collision resistant, so a delta is only ever
//!   trusted once the rebuilt file has the manifest's BLAKE3; on any mismatch (a corrupted
//!   delta, a peer with other data) the whole file is fetched instead, and checked too.
//! - `fast_rsync` works on whole buffers (about 5x the file size in memory at the peer), so
//!   files above [`DeltaOptions::max_delta_bytes`] always travel whole.
//! - The block size grows with the file (half its square root, 1 to 64 KiB; rsync uses the
//!   square root): small blocks find small changes, large ones keep the signature small. A
//!   block's signature is 8 bytes (rolling checksum and 4 bytes of MD4), so the receiver sends
//!   about 0.2% of the file's size for 64 MiB.
//!
//! The peer is behind the [`Peer`] trait: a remote agent answers over the network; tests and
//! benchmarks answer from a local file.

use fast_rsync::{Signature, SignatureOptions};
use std::io;

/// Limits of delta transfer.
#[derive(Debug, Clone, Copy)]
pub struct DeltaOptions {
    /// Files larger than this are sent whole.
    pub max_delta_bytes: u64,
}

impl Default for DeltaOptions {
    fn default() -> Self {
        DeltaOptions {
            max_delta_bytes: 256 << 20,
        }
    }
}

/// What holds the new version of a file.
pub trait Peer {
    /// A delta from the receiver's old version (its `signature`) to the new version.
    fn delta(&self, signature: &[u8]) -> io::Result<Vec<u8>>;
    /// The new version, whole.
    fn whole(&self) -> io::Result<Vec<u8>>;
}

/// How a file came over.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Transfer {
    /// Bytes the receiver sent (the signature).
    pub bytes_up: u64,
    /// Bytes the peer sent (delta, and the whole file after a fallback).
    pub bytes_down: u64,
    /// True when the file came whole (no old version, too large, or after a bad delta).
    pub whole: bool,
    /// Why a delta was not used, when it was tried and failed.
    pub fell_back: Option<String>,
}

/// Why a file could not be brought over.
#[derive(Debug, thiserror::Error)]
pub enum DeltaError {
    /// The peer could not be asked.
    #[error("the peer could not send the file: {0}")]
    Peer(#[source] io::Error),
    /// Even the whole file from the peer does not have the manifest's hash.
    #[error(
        "the file from the peer has BLAKE3 {actual}, not the manifest's {expected}: the peer holds other data; stage it from the shared source instead"
    )]
    Mismatch {
        /// The manifest's hash.
        expected: String,
        /// What arrived.
        actual: String,
    },
}

/// The signature block size for a file of `len` bytes: half its square root, so that a changed
/// region costs at most one block beyond itself (64 KiB changed in 64 MiB: 4 KiB more).
fn block_size(len: usize) -> u32 {
    let half_root = ((len as f64).sqrt() / 2.0) as u32;
    half_root.next_power_of_two().clamp(1024, 64 * 1024)
}

/// The receiver's side: the signature of its old version.
pub fn signature(old: &[u8]) -> Vec<u8> {
    Signature::calculate(
        old,
        SignatureOptions {
            block_size: block_size(old.len()),
            // With the 32-bit rolling checksum, 64 bits per block: a false match is rare, and
            // the BLAKE3 check catches it (the file then comes whole).
            crypto_hash_size: 4,
        },
    )
    .into_serialized()
}

/// The peer's side: the delta from a `signature` to `new`.
pub fn delta(signature: &[u8], new: &[u8]) -> io::Result<Vec<u8>> {
    let sig = Signature::deserialize(signature.to_vec())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not an rsync signature"))?;
    let mut out = Vec::new();
    fast_rsync::diff(&sig.index(), new, &mut out)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("diff failed: {e}")))?;
    Ok(out)
}

/// Brings the new version of a file over from `peer`: a delta from `old` when there is an old
/// version small enough, checked against `expected` (BLAKE3 hex); the whole file when there is
/// none, or when the delta fails or rebuilds something else. Returns the new content.
pub fn fetch(
    old: Option<&[u8]>,
    expected: &str,
    peer: &dyn Peer,
    options: DeltaOptions,
) -> Result<(Vec<u8>, Transfer), DeltaError> {
    let mut t = Transfer::default();
    if let Some(old) = old.filter(|o| o.len() as u64 <= options.max_delta_bytes) {
        let sig = signature(old);
        t.bytes_up = sig.len() as u64;
        let attempt = peer.delta(&sig).and_then(|d| {
            t.bytes_down += d.len() as u64;
            let mut out = Vec::with_capacity(old.len());
            fast_rsync::apply_limited(old, &d, &mut out, options.max_delta_bytes as usize)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            Ok(out)
        });
        match attempt {
            Ok(new) => {
                let actual = blake3::hash(&new).to_hex().to_string();
                if actual == expected {
                    return Ok((new, t));
                }
                t.fell_back = Some(format!(
                    "the delta rebuilt BLAKE3 {actual}, not the manifest's {expected}"
                ));
            }
            Err(e) => t.fell_back = Some(format!("the delta failed: {e}")),
        }
    }
    t.whole = true;
    let new = peer.whole().map_err(DeltaError::Peer)?;
    t.bytes_down += new.len() as u64;
    let actual = blake3::hash(&new).to_hex().to_string();
    if actual != expected {
        return Err(DeltaError::Mismatch {
            expected: expected.to_string(),
            actual,
        });
    }
    Ok((new, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_follow_the_square_root_within_bounds() {
        assert_eq!(block_size(0), 1024);
        assert_eq!(block_size(4 << 20), 1024);
        assert_eq!(block_size(64 << 20), 4096);
        assert_eq!(block_size(64 << 30), 65536);
    }
}
