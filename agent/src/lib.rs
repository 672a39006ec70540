//! The node agent: runs jobs on one node through per-job shims ([`shim`]). In the embedded
//! default it runs inside `labpool serve`, speaking the same protocol (`labpool_api::agent`) a
//! remote agent does. It knows the controller only through that protocol and the in-process seam
//! (`labpool_link::embedded`): the two crates never depend on each other.

// The paths these files were written with, from when they were modules of the binary.
use labpool_api as api;
use labpool_host::{atomic_file, clock, discovery, env_vars, identity, member_file, retry};
use labpool_link::{embedded, metrics_http, socket, transport, tunnel};
use labpool_settings as settings;

pub mod checkpoint;
pub mod cli_relay;
pub mod copy_host;
pub mod corner;
pub mod daemon;
pub mod environment;
pub mod executor;
pub mod forward;
pub mod gang;
pub mod gpu_sampler;
pub mod hub_cache;
pub mod jobdir;
pub mod login_env;
pub mod node;
pub mod peer;
pub mod procs;
pub mod shim;
pub mod slice;
pub mod stager;
