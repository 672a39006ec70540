//! Datasets in the engine: what is registered, what each node's cache holds, and a placed job's
//! way from PENDING through STAGING to RUNNING, with their API handlers and tables.
//!
//! Decisions recorded here:
//! - A job gets the *current* version of each dataset when it is placed; the version is stored
//!   with the job (`job_datasets`), so a restart resumes the same stage and a rescan never
//!   changes data under a running job.
//! - A staging job holds its GPUs, but its clock (time limit, credits, fair-share) starts only
//!   when it is RUNNING. A stage that fails ends the job FAILED without charge; a cache that
//!   cannot make room sends it back to the queue with reason `CacheFull`.
//! - A dataset larger than every node's cache is streamed, not staged (`streamed.rs`).
//! - Pins: versions read by running or staging jobs on a node, and versions the pass predicts
//!   a queued job will need there (its prefetches), are never removed to make room.

pub mod db;
pub mod errors;
pub mod http;
pub mod pass_view;
pub mod prefetch;
pub mod registry;
pub mod stages;
pub mod state;
pub mod streamed;
pub mod verify;
pub mod views;

pub use db::{DatasetRow, VersionRow};
pub use state::{DataState, NodeCacheState};
