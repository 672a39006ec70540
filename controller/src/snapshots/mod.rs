//! Snapshots: the open repository, members' reads and restores, and the scheduled backups,
//! with their API handlers.

pub mod copy;
pub mod http;
pub mod service;

pub use service::{SnapshotService, backup_options, open_or_init, timers};
