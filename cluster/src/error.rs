//! Why a request was refused, with the values and what to do.

use std::path::PathBuf;

/// A refused request or an unusable key.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No signature headers, or malformed ones.
    #[error(
        "the request is not signed with the cluster key ({0}); every agent and the controller must run labpool with the same cluster.key"
    )]
    Unsigned(String),
    /// The signature does not match: the peer holds another key (or the request was changed).
    #[error(
        "the request's signature does not match: the peer signs with a different cluster key (or the request was altered on the way); copy the controller's cluster.key to this node (mode 0600) and restart its agent"
    )]
    WrongKey,
    /// The peer's clock is too far from ours.
    #[error("the peer's clock is {} {} this node's, beyond the {} s window, so its requests are refused; synchronise the clocks on both nodes: timedatectl set-ntp true; chronyc sources", describe_secs(.skew_ms.unsigned_abs()), if *.skew_ms > 0 { "ahead of" } else { "behind" }, .window_ms / 1000)]
    Skew {
        /// The peer's time minus ours, ms.
        skew_ms: i64,
        /// The window, ms.
        window_ms: u64,
    },
    /// The nonce was seen before within the window.
    #[error(
        "the request was already received once (nonce {nonce}): a replay is refused; if this is a retry, sign it again"
    )]
    Replay {
        /// The repeated nonce.
        nonce: String,
    },
    /// The key file cannot be used.
    #[error("cluster key {}: {why}", path.display())]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do.
        why: String,
    },
}

/// `612.4 s` or `10 min 12 s`.
fn describe_secs(ms: u64) -> String {
    let s = ms as f64 / 1000.0;
    if s < 120.0 {
        format!("{s:.1} s")
    } else {
        format!("{} min {} s", ms / 60_000, (ms / 1000) % 60)
    }
}
