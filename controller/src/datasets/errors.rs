//! Errors shared by the dataset and cache commands.

use crate::datasets::DataState;
use crate::error::ApiError;

/// The error for a name that is not registered.
pub fn unknown_dataset(name: &str, data: &DataState) -> ApiError {
    ApiError::not_found(
        format!("no dataset {name:?}"),
        Some(crate::datasets::registry::registered_hint(
            data.datasets.keys().map(String::as_str),
        )),
    )
}

/// The error for a node that is not in the pool.
pub(super) fn unknown_node(name: &str, sched: &labpool_scheduler::Scheduler) -> ApiError {
    let known: Vec<&str> = sched.nodes().map(|n| n.name()).collect();
    ApiError::not_found(
        format!("no node {name:?}"),
        Some(format!("nodes: {}", known.join(", "))),
    )
}

/// The error for a member trying an admin's dataset or cache command.
pub fn admin_only(what: &str) -> ApiError {
    ApiError::forbidden(
        format!("`{what}` is for admins"),
        Some("admins are root and members of admin_group under [controller]".to_string()),
    )
}
