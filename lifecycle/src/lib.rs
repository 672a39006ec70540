//! labpool's job lifecycle, deterministic and sans-IO: [`Event`]s and `now` go in,
//! [`Effect`]s come out. Each state change of a job is one [`Transition`] value; the shell
//! applies it to its memory ([`JobLife::apply`]) and to its database from the same value, so
//! the two cannot drift. The controller (`labpool serve`) and the simulator (`labpool sim`)
//! both drive it, so the simulator's figures are the daemon's own.
//!
//! The crate reads no clock, touches no file, socket or database, and iterates in a fixed
//! order: the same events give the same effects.
//!
//! ```
//! use labpool_lifecycle::{Effect, Event, JobLife, Lifecycle, Placement, Readiness};
//!
//! let mut life: Lifecycle = Lifecycle::new();
//! life.admit(7, JobLife::pending(true));
//! let placement = Placement {
//!     node: "gpu1".into(),
//!     gpus: vec![0],
//!     stdout: "/home/a/out".into(),
//!     stderr: "/home/a/out".into(),
//!     others: vec![],
//!     ports: None,
//! };
//! let ready = Readiness::Ready { isolation: "cgroup v2".into() };
//! let effects = life.handle(Event::Placed { job: 7, placement, ready }, 1_000);
//! assert!(matches!(effects[0], Effect::Persist { job: 7, .. }));
//! assert_eq!(
//!     effects[1],
//!     Effect::Launch { job: 7, attempt: 1, node: "gpu1".into(), staged: false }
//! );
//! ```
#![deny(missing_docs)]

mod core;
mod event;
mod life;
pub mod rules;
mod suspend;
mod transition;

pub use crate::core::{Lifecycle, Tracked};
pub use event::{Effect, Event};
pub use life::{
    GpuPause, Hold, JobLife, PartEnded, Preemption, SUSPENDED, preempt_requester, preemptor,
};
pub use rules::{Lacks, Outcome, Readiness, Stale};
pub use transition::{Placement, StageKind, Transition, gpu_list};
