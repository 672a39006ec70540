//! Checking: the signature, the clock-skew window and the nonce cache that refuses replays.

use crate::sign::{canonical, mac};
use crate::{AuthError, ClusterKey, Head, Request, Signature};
use hmac::Mac;
use std::collections::{BTreeMap, BTreeSet};

/// Checks requests from peers. Keeps the nonces of the last window, so a request is accepted
/// at most once; a nonce older than the window cannot come back, because its timestamp is then
/// outside the window.
#[derive(Debug)]
pub struct Verifier {
    key: ClusterKey,
    window_ms: u64,
    /// Nonces seen, by the timestamp they came with (for eviction in time order).
    seen: BTreeSet<(i64, String)>,
    by_nonce: BTreeMap<String, i64>,
}

impl Verifier {
    /// A verifier for `key`, accepting clocks at most `window_ms` apart.
    pub fn new(key: ClusterKey, window_ms: u64) -> Verifier {
        Verifier {
            key,
            window_ms,
            seen: BTreeSet::new(),
            by_nonce: BTreeMap::new(),
        }
    }

    /// Checks `sig` on `req`, received at `now_ms` by this node's clock. The order matters for
    /// the messages: a wrong key is said before a skew, since a skewed clock with the wrong key
    /// would otherwise send someone to fix the clock first.
    pub fn verify(
        &mut self,
        req: &Request<'_>,
        sig: &Signature,
        now_ms: i64,
    ) -> Result<(), AuthError> {
        req.with_head(|head| self.verify_head(head, sig, now_ms))
    }

    /// Checks `sig` on a request given by its [`Head`]: before its body is read. The caller
    /// must then check that the body it reads has the hash the head claims.
    pub fn verify_head(
        &mut self,
        req: &Head<'_>,
        sig: &Signature,
        now_ms: i64,
    ) -> Result<(), AuthError> {
        if req.body_sha256.len() != 64 {
            return Err(AuthError::Unsigned(
                "the body's SHA-256 (64 hex digits) is missing".to_string(),
            ));
        }
        if sig.nonce.is_empty() || sig.nonce.len() > 128 {
            return Err(AuthError::Unsigned(
                "a nonce of 1 to 128 characters is missing".to_string(),
            ));
        }
        let tag = hex::decode(&sig.mac)
            .map_err(|_| AuthError::Unsigned("the signature is not hex".to_string()))?;
        mac(&self.key, &canonical(req, sig.timestamp_ms, &sig.nonce))
            .verify_slice(&tag)
            .map_err(|_| AuthError::WrongKey)?;
        let skew_ms = sig.timestamp_ms - now_ms;
        if skew_ms.unsigned_abs() > self.window_ms {
            return Err(AuthError::Skew {
                skew_ms,
                window_ms: self.window_ms,
            });
        }
        self.evict(now_ms);
        if self.by_nonce.contains_key(&sig.nonce) {
            return Err(AuthError::Replay {
                nonce: sig.nonce.clone(),
            });
        }
        self.by_nonce.insert(sig.nonce.clone(), sig.timestamp_ms);
        self.seen.insert((sig.timestamp_ms, sig.nonce.clone()));
        Ok(())
    }

    /// Forgets nonces whose timestamps are now outside the window: those requests would be
    /// refused for their time anyway.
    fn evict(&mut self, now_ms: i64) {
        let oldest = now_ms - self.window_ms as i64;
        while let Some((t, _)) = self.seen.first() {
            if *t >= oldest {
                break;
            }
            let (_, nonce) = self.seen.pop_first().expect("not empty");
            self.by_nonce.remove(&nonce);
        }
    }

    /// Nonces held (for tests and metrics).
    pub fn remembered(&self) -> usize {
        self.by_nonce.len()
    }
}
