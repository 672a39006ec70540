//! Software environments: builds, the names that point at them and the submit-time checks,
//! with their API handlers and tables.

pub mod build;
pub mod db;
pub mod http;
pub mod names;
pub mod service;
pub mod staging;
pub mod store;

pub use service::EnvService;
pub use store::archive_path;
