//! Trust between labpool's nodes: agents and the controller sign every request with the
//! cluster key, and refuse requests that are unsigned, signed with another key, replayed, or
//! sent from a clock too far from their own.
//!
//! ```
//! use labpool_cluster::{ClusterKey, Request, Verifier};
//! let key = ClusterKey::from_bytes([7; 32]);
//! let req = Request { method: "POST", path: "/v1/agent/report", body: b"{}", uid: None };
//! let signed = key.sign(&req, 1_000_000, "n1");
//! let mut verifier = Verifier::new(key, 300_000);
//! assert!(verifier.verify(&req, &signed, 1_000_500).is_ok());
//! // The same request again is a replay.
//! assert!(verifier.verify(&req, &signed, 1_000_600).is_err());
//! ```

pub mod error;
pub mod key;
pub mod secret_file;
pub mod sign;
pub mod verify;

pub use error::AuthError;
pub use key::ClusterKey;
pub use secret_file::{SecretFileError, read_owner_only};
pub use sign::{Head, Request, Signature, body_sha256};
pub use verify::Verifier;
