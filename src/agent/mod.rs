//! The node agent: runs jobs on one node through per-job shims. In the embedded default it runs
//! inside `labpool serve`, speaking the same protocol ([`crate::api::agent`]) a remote agent does.

pub mod copy_host;
pub mod corner;
pub mod daemon;
pub mod environment;
pub mod executor;
pub mod gang;
pub mod gpu_sampler;
pub mod jobdir;
pub mod login_env;
pub mod node;
pub mod peer;
pub mod procs;
pub mod stager;
