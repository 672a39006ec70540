//! Signing: HMAC-SHA256 over a canonical text of the request.

use crate::ClusterKey;
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

/// What is signed of a request.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// HTTP method.
    pub method: &'a str,
    /// Path with query.
    pub path: &'a str,
    /// Body bytes.
    pub body: &'a [u8],
    /// The member an agent vouches for (a CLI call it forwards), if any.
    pub uid: Option<u32>,
}

/// What is signed of a request, with the body as its hash: what a server can check from the
/// headers alone, before it reads a byte of the body.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    /// HTTP method.
    pub method: &'a str,
    /// Path with query.
    pub path: &'a str,
    /// The body's SHA-256, lower-case hex (the `x-labpool-body-sha256` header).
    pub body_sha256: &'a str,
    /// The member an agent vouches for (a CLI call it forwards), if any.
    pub uid: Option<u32>,
}

/// A body's SHA-256 as the signature and its header carry it: lower-case hex.
pub fn body_sha256(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

/// The signature headers of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The signer's clock, ms since the epoch.
    pub timestamp_ms: i64,
    /// A value never used twice by the signer.
    pub nonce: String,
    /// Hex HMAC-SHA256 of the canonical text.
    pub mac: String,
}

/// Header names, for transports.
pub mod headers {
    /// The signer's time.
    pub const TIMESTAMP: &str = "x-labpool-timestamp";
    /// The nonce.
    pub const NONCE: &str = "x-labpool-nonce";
    /// The MAC.
    pub const SIGNATURE: &str = "x-labpool-signature";
    /// The vouched-for uid.
    pub const UID: &str = "x-labpool-uid";
    /// The body's SHA-256: checked with the signature before the body is read, and against
    /// the body once it is.
    pub const BODY_SHA256: &str = "x-labpool-body-sha256";
}

/// The text that is signed: every part on its own line, the body as its SHA-256, so that no
/// part can be moved into another.
pub(crate) fn canonical(head: &Head<'_>, timestamp_ms: i64, nonce: &str) -> Vec<u8> {
    let uid = head.uid.map_or_else(|| "-".to_string(), |u| u.to_string());
    format!(
        "labpool-v1\n{}\n{}\n{}\n{uid}\n{timestamp_ms}\n{nonce}",
        head.method, head.path, head.body_sha256
    )
    .into_bytes()
}

impl Request<'_> {
    /// Runs `f` on the request's [`Head`] (its body hashed).
    pub(crate) fn with_head<T>(&self, f: impl FnOnce(&Head<'_>) -> T) -> T {
        let hash = body_sha256(self.body);
        f(&Head {
            method: self.method,
            path: self.path,
            body_sha256: &hash,
            uid: self.uid,
        })
    }
}

pub(crate) fn mac(key: &ClusterKey, text: &[u8]) -> hmac::Hmac<Sha256> {
    let mut m =
        hmac::Hmac::<Sha256>::new_from_slice(key.bytes()).expect("HMAC takes any key length");
    m.update(text);
    m
}

impl ClusterKey {
    /// Signs `req` at `timestamp_ms` with `nonce` (unique per request: a counter with a random
    /// start, or random bytes).
    pub fn sign(&self, req: &Request<'_>, timestamp_ms: i64, nonce: &str) -> Signature {
        req.with_head(|head| self.sign_head(head, timestamp_ms, nonce))
    }

    /// Signs a request given by its [`Head`] (its body already hashed).
    pub fn sign_head(&self, head: &Head<'_>, timestamp_ms: i64, nonce: &str) -> Signature {
        let tag = mac(self, &canonical(head, timestamp_ms, nonce))
            .finalize()
            .into_bytes();
        Signature {
            timestamp_ms,
            nonce: nonce.to_string(),
            mac: hex::encode(tag),
        }
    }
}
