//! labpool's software environments: what a job runs inside.
//!
//! An environment is described by a spec (a `requirements.txt`, a `pyproject.toml`, an
//! `environment.yml`, a container image, or a list of `module load` lines). Locking turns the
//! spec into an exact lock; the environment's id is the hash of its kind, its lock and the
//! platform ([`id::env_id`]). Builds land at a fixed path named by that id (Python
//! environments are not relocatable), are packed with tar + zstd ([`pack`]) and unpacked on a
//! node at the same path. [`activate`] says how a job's command runs inside one; [`lint`] and
//! [`hygiene`] are the job-environment rules (no `CUDA_VISIBLE_DEVICES` overrides; GPU memory
//! growth on by default).
//!
//! Knows nothing of jobs, nodes or HTTP.
//!
//! ```no_run
//! use labpool_envs::{build::build, lock::lock, pack, tools::Tools};
//! use std::path::Path;
//!
//! let tools = Tools::detect(None);
//! let mut log = Vec::new();
//! let locked = lock(Path::new("requirements.txt"), None, &tools, &mut log)?;
//! let dest = Path::new("/var/lib/labpool/envs").join(&locked.id);
//! std::fs::create_dir_all(&dest).unwrap();
//! build(&locked, &dest, &tools, &mut log)?;
//! pack::pack(&dest, Path::new("/var/lib/labpool/envs/env.tar.zst"))?;
//! # Ok::<(), labpool_envs::EnvError>(())
//! ```

#![deny(missing_docs)]

pub mod activate;
pub mod build;
mod conda;
mod container;
pub mod error;
pub mod hygiene;
pub mod id;
pub mod kind;
pub mod lint;
mod lint_shell;
pub mod lock;
mod modules;
pub mod pack;
mod run;
pub mod shebang;
pub mod tools;
mod venv;
pub mod verify;

pub use error::EnvError;
pub use kind::EnvKind;
pub use lock::Lock;
