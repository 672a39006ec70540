//! Storage limits for the shared file systems (home, scratch) and the datasets root.
//!
//! - [`scan`]: a parallel walk that never crosses a mount or follows a symlink, giving
//!   allocated bytes, apparent bytes and entries per uid, and each uid's biggest directories.
//! - [`limits`]: soft and hard limits on bytes and entries with a grace period, and the
//!   decision a submit takes from them ([`limits::evaluate`]); it takes `now` as an argument.
//! - [`purge`]: the scratch purge, planned first and executed through directory file
//!   descriptors, re-checking every file on its descriptor before it is unlinked.
//! - [`audit`]: which entries under the datasets root members could write, and the fix.
//! - [`kernel`]: limits the kernel enforces where it can (btrfs qgroups; `setquota` and
//!   `xfs_quota` where the mount has quotas on).
//! - [`size`]: sizes as `du -h` prints them (binary K/M/G/T) and durations (`7d`).

pub mod audit;
pub mod error;
pub mod kernel;
pub mod limits;
pub mod mounts;
pub mod notice;
pub mod progress;
pub mod purge;
pub mod scan;
pub mod size;
mod walk;

pub use error::QuotaError;
pub use progress::Progress;
