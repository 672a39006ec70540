//! labpool's snapshot repository: nightly deduplicated backups of shared data, and the reads
//! that get a deleted file back.
//!
//! Files are cut into content-defined chunks (FastCDC, about 1 MiB), named by BLAKE3,
//! compressed with zstd when that helps, and stored once in packs of about 32 MiB. Directory
//! listings are content-addressed trees, so an unchanged folder costs nothing in a new
//! snapshot. Space grows with what changed, not with the number of days kept.
//!
//! The crate knows nothing of jobs or users beyond uids: callers pass `only_uid` to restrict a
//! member to what they owned.

pub mod backup;
pub mod blob;
pub mod browse;
pub mod check;
pub mod copy;
pub mod error;
pub mod index;
pub mod pack;
pub mod progress;
pub mod prune;
pub mod repo;
pub mod restore;
pub mod retention;
pub mod select;
pub mod snapshot;
pub mod tree;

pub use backup::{BackupOptions, BackupReport, create};
pub use error::{Result, SnapshotError};
pub use progress::Progress;
pub use repo::{LockMode, Repository};
pub use restore::{RestoreOptions, RestoreReport};
pub use retention::Policy;
pub use snapshot::Snapshot;
