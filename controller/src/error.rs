//! Errors the API returns: an HTTP status, what happened, and what to do next.

use crate::api::ErrorBody;

/// An error for an API caller.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Body.
    pub body: ErrorBody,
}

impl ApiError {
    fn new(status: u16, error: impl Into<String>, hint: Option<String>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                error: error.into(),
                hint,
            },
        }
    }

    /// 400: the request is wrong.
    pub fn bad_request(error: impl Into<String>, hint: Option<String>) -> ApiError {
        ApiError::new(400, error, hint)
    }

    /// 403: the caller may not do this.
    pub fn forbidden(error: impl Into<String>, hint: Option<String>) -> ApiError {
        ApiError::new(403, error, hint)
    }

    /// 404: no such thing.
    pub fn not_found(error: impl Into<String>, hint: Option<String>) -> ApiError {
        ApiError::new(404, error, hint)
    }

    /// 409: the request does not fit the current state (an agent the controller does not
    /// know any more must register again).
    pub fn conflict(error: impl Into<String>, hint: Option<String>) -> ApiError {
        ApiError::new(409, error, hint)
    }

    /// 502: a node the request goes through did not do its part.
    pub fn bad_gateway(error: impl Into<String>, hint: Option<String>) -> ApiError {
        ApiError::new(502, error, hint)
    }

    /// 500: the controller failed.
    pub fn internal(error: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            500,
            format!("the controller failed: {error}"),
            Some("the controller log says more".to_string()),
        )
    }

    /// 507: the state file system is full, and the engine takes no work until there is room.
    pub fn storage_full(why: String) -> ApiError {
        ApiError::new(
            507,
            why,
            Some(
                "reading (queue, show, history) still works; new work is taken again once there is room"
                    .to_string(),
            ),
        )
    }

    /// 503: the controller's engine is not taking requests (stopping, or stopped on an error).
    pub fn unavailable() -> ApiError {
        ApiError::new(
            503,
            "the controller is not taking requests: it is stopping, or it stopped on an error",
            Some(
                "its log (log_file under [controller]) says which; start `labpool serve` again"
                    .to_string(),
            ),
        )
    }
}
