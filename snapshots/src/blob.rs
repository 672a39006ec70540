//! Blobs: the unit of storage. A data blob is one content-defined chunk of a file; a tree blob is
//! one directory listing. Both are named by the BLAKE3 hash of their uncompressed bytes.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A blob's id: BLAKE3 of its uncompressed content.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlobId(pub [u8; 32]);

impl BlobId {
    /// The id of `data`.
    pub fn of(data: &[u8]) -> BlobId {
        BlobId(*blake3::hash(data).as_bytes())
    }

    /// Lower-case hex.
    pub fn hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    /// Parses 64 hex digits.
    pub fn from_hex(s: &str) -> Option<BlobId> {
        blake3::Hash::from_hex(s)
            .ok()
            .map(|h| BlobId(*h.as_bytes()))
    }
}

impl fmt::Debug for BlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", &self.hex()[..16])
    }
}

impl fmt::Display for BlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

/// What a blob holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlobKind {
    /// A chunk of file content.
    Data,
    /// A serialized directory listing.
    Tree,
}

impl BlobKind {
    /// The byte stored in pack trailers and the index.
    pub fn code(self) -> u8 {
        match self {
            BlobKind::Data => 0,
            BlobKind::Tree => 1,
        }
    }

    /// The inverse of [`BlobKind::code`].
    pub fn from_code(c: u8) -> Option<BlobKind> {
        match c {
            0 => Some(BlobKind::Data),
            1 => Some(BlobKind::Tree),
            _ => None,
        }
    }
}

/// zstd level for compressible blobs: fast, and most of the gain on text and metadata.
const ZSTD_LEVEL: i32 = 3;
/// How much of a chunk to try before deciding it is incompressible.
const SAMPLE: usize = 64 * 1024;

/// A blob as stored: `compressed` says whether `bytes` are zstd or raw.
pub struct Stored {
    /// The stored bytes.
    pub bytes: Vec<u8>,
    /// zstd (true) or raw (false).
    pub compressed: bool,
}

/// Compresses `data` unless it does not shrink. A sample of a large chunk is tried first, so
/// incompressible data (checkpoints, JPEGs) costs a 64 KiB attempt, not a full one.
pub fn encode(data: &[u8]) -> Stored {
    if data.len() > 2 * SAMPLE {
        let sample = zstd::bulk::compress(&data[..SAMPLE], 1).unwrap_or_default();
        if sample.is_empty() || sample.len() * 100 > SAMPLE * 95 {
            return Stored {
                bytes: data.to_vec(),
                compressed: false,
            };
        }
    }
    match zstd::bulk::compress(data, ZSTD_LEVEL) {
        Ok(z) if z.len() < data.len() => Stored {
            bytes: z,
            compressed: true,
        },
        _ => Stored {
            bytes: data.to_vec(),
            compressed: false,
        },
    }
}

/// The inverse of [`encode`]; `raw_len` bounds the output.
pub fn decode(stored: &[u8], compressed: bool, raw_len: usize) -> std::io::Result<Vec<u8>> {
    if compressed {
        zstd::bulk::decompress(stored, raw_len)
    } else {
        Ok(stored.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_compresses_and_noise_is_stored_raw() {
        let text = b"epoch 1 loss 0.25\n".repeat(20_000);
        let s = encode(&text);
        assert!(s.compressed && s.bytes.len() < text.len() / 10);
        assert_eq!(decode(&s.bytes, true, text.len()).unwrap(), text);

        let noise = labpool_testkit::bytes(1, 300_000);
        let s = encode(&noise);
        assert!(!s.compressed);
        assert_eq!(s.bytes, noise);
    }

    #[test]
    fn ids_round_trip_through_hex() {
        let id = BlobId::of(b"x");
        assert_eq!(BlobId::from_hex(&id.hex()), Some(id));
        assert_eq!(BlobId::from_hex("zz"), None);
    }
}
