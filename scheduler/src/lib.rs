//! labpool's scheduling core: the job and node model, `#SBATCH`/`#LABPOOL` directive parsing,
//! partitions, admission, placement (filters then scorers) and pending reasons.
//!
//! GPUs are held whole, or, for `--gpu-share` jobs, in share slots: a GPU configured with
//! `share = N` takes up to N sharing jobs at once (see [`node`] and [`profile`]).
//!
//! The core is deterministic: it reads no clock, does no I/O and iterates only ordered maps, so
//! the controller and a simulator driving it with the same events get the same decisions.
//!
//! ```
//! use labpool_scheduler::{Decision, JobId, JobSpec, Resources, Scheduler, Timestamp};
//! use labpool_scheduler::admission::AdmitRequest;
//! use labpool_scheduler::node::{GpuDevice, NodeSpec};
//! use labpool_scheduler::partition::Partition;
//! use labpool_scheduler::time::TimeLimit;
//!
//! let normal = Partition {
//!     name: "normal".into(), default: true, priority: 0, nodes: None,
//!     default_time: TimeLimit::Seconds(3600), max_time: TimeLimit::Seconds(86_400),
//!     allow_accounts: None, max_gpus_per_job: None, default_slice: None,
//! };
//! let mut s = Scheduler::new(vec![normal]).unwrap();
//! let gpu = |index| GpuDevice { index, gpu_type: "rtx4090".into(), product: "virtual".into(), memory_mib: 0, uuid: None, share: 1, slices: vec![], nvlink_peer: None };
//! s.upsert_node(NodeSpec { name: "box".into(), gpus: vec![gpu(0), gpu(1)], cpus: 8, mem_mib: 65_536, features: vec![] }).unwrap();
//!
//! let res = Resources { nodes: 1, gpus: 2, gpu_type: None, cpus: 1, mem_mib: 0, gpu_share: false, slice: None };
//! let req = AdmitRequest { user: "alice", account: None, partition: None, time_limit: None, resources: &res, nodes: &labpool_scheduler::job::ANY_NODE, emergency: false, count: 1 };
//! let admitted = s.admit(&req).unwrap();
//! s.enqueue(JobSpec {
//!     id: JobId(1), name: "train".into(), user: "alice".into(), partition: admitted.partition,
//!     resources: res, time_limit: admitted.time_limit, submit_time: Timestamp(0), ..JobSpec::default()
//! });
//! let decisions = s.schedule(Timestamp(1_000));
//! assert!(matches!(&decisions[0], Decision::Start { allocation, .. } if allocation.gpus == [0, 1]));
//! s.check_invariants().unwrap();
//! ```
#![deny(missing_docs)]

pub mod admission;
pub mod array;
pub mod cache_view;
pub mod constraint;
pub mod credits;
pub mod dependency;
pub mod export;
pub mod gpu;
pub mod hostlist;
pub mod job;
pub mod limits;
pub mod node;
pub mod options;
pub mod pairs;
pub mod partition;
pub mod pass;
pub mod peers;
pub mod placement;
pub mod policy;
pub mod preempt;
pub mod priority;
pub mod profile;
pub mod reason;
pub mod reservation;
pub mod runtime;
pub mod scheduler;
pub mod script;
pub mod slice;
pub mod time;

pub use job::{
    Allocation, HoldBy, JobId, JobSpec, JobState, NodeRequest, NodeShare, Part, PortBlock,
    Resources,
};
pub use scheduler::suspend::{SuspendError, Suspension};
pub use scheduler::{Decision, Prediction, Scheduler};
pub use time::{TimeLimit, Timestamp};
