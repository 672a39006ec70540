//! Quotas: usage scans, limits and the submit check, the scratch purge and the datasets audit,
//! with their API handlers and tables. The work itself is the `labpool-quotas` crate's.

pub mod audit;
pub mod db;
pub mod http;
pub mod limits;
pub mod purge;
pub mod report;
pub mod scan;
pub mod service;
pub(crate) mod stored;

pub use service::{QuotaService, timers};
