//! labpool's datasets and node-local cache: manifests and versions of shared dataset trees, and
//! a per-node cache that stages versions next to each other, copying only what changed.
//!
//! ```
//! use labpool_cache::manifest::scan;
//! use labpool_cache::store::{NodeCache, StageOptions};
//!
//! let src = tempfile::tempdir().unwrap();
//! std::fs::write(src.path().join("train.bin"), b"0123456789").unwrap();
//! let manifest = scan(src.path(), 2, &|_| {}).unwrap();
//! let version = manifest.version();
//!
//! let root = tempfile::tempdir().unwrap();
//! let cache = NodeCache::open(root.path()).unwrap();
//! let report = cache.stage("toy", &version, &manifest, src.path(), &StageOptions::default(), &|_| {}).unwrap();
//! assert_eq!(report.bytes_copied, 10);
//! assert!(cache.is_complete("toy", &version));
//! assert_eq!(std::fs::read(cache.dir("toy", &version).join("train.bin")).unwrap(), b"0123456789");
//! ```
#![deny(missing_docs)]

pub mod copy;
pub mod delta;
pub mod error;
pub mod evict;
pub mod hub;
pub mod inventory;
pub mod layout;
pub mod manifest;
pub mod peer;
pub mod registry;
pub mod stage;
mod staged;
pub mod store;
pub mod verify;
mod walk;

pub use error::CacheError;
