//! The lab model cache: model weights kept in the Hugging Face hub's cache layout
//! ([`labpool_cache::hub`]), each model one dataset, so that versions, staging, pins,
//! eviction, peer staging and locality apply to it as to any dataset.
//!
//! Decisions recorded here:
//! - A model lives in a namespace: the lab's shared one (admins, `--shared`) or a member's own.
//!   A job's `--model org/name` finds the member's own first, then the shared one, as
//!   environment names do.
//! - Its dataset's name is made from the namespace and the repository (`model-` and 20 hex
//!   digits), so nothing else needs recording: the tree's path says whose it is.
//! - All of a model's revisions are one dataset version, so a job may ask for any of them with
//!   `from_pretrained(..., revision=...)`; adding a revision makes a new version that shares
//!   every unchanged file with the last, and nodes copy only what is new.
//! - A member's model is not private: the node caches are readable by every member, as
//!   datasets are. Namespaces keep names apart, not bytes secret.

mod copy;
pub mod http;
mod names;
pub mod submit;

pub use names::DATASET_PREFIX;
