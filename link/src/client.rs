//! The CLI's side of the API: HTTP/1.1 over the controller's Unix socket.

use crate::api::ErrorBody;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use tokio::net::UnixStream;

/// The largest answer the CLI takes from the controller.
const MAX_ANSWER: usize = 1 << 30;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket did not answer.
    #[error("cannot reach the labpool controller at {socket}: {error}\nhint: {}", connect_hint(.error))]
    Connect {
        /// The socket.
        socket: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// HTTP failed mid-way.
    #[error("talking to the controller failed: {0}")]
    Http(String),
    /// The controller refused, with its reason.
    #[error("{}{}", .body.error, .body.hint.as_ref().map(|h| format!("\nhint: {h}")).unwrap_or_default())]
    Api {
        /// HTTP status.
        status: u16,
        /// Its message.
        body: ErrorBody,
    },
    /// The answer was not what this version expects.
    #[error(
        "unexpected answer from the controller ({0}); are the CLI and `labpool serve` the same version?"
    )]
    Decode(String),
}

fn connect_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            "the socket or a directory above it is not open to you; an admin can check their permissions (the socket is meant to be 0666)"
        }
        _ => {
            "start it with `labpool serve` (same --config), or check `socket` under [controller] in the config"
        }
    }
}

/// A client for one controller socket.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
}

impl Client {
    /// A client for the socket at `socket`.
    pub fn new(socket: &Path) -> Client {
        Client {
            socket: socket.to_path_buf(),
        }
    }

    /// `GET path`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.call(Method::GET, path, None).await
    }

    /// `GET path?query`, the query form-encoded from `query` (fields that are `None` left
    /// out), so that names with `&`, `=` or spaces arrive as they were typed.
    pub async fn get_query<Q: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        query: &Q,
    ) -> Result<T, ClientError> {
        self.call(Method::GET, &with_query(path, query)?, None)
            .await
    }

    /// Finished jobs, newest first, at most `max`: page after page of `/v1/history`.
    pub async fn history(
        &self,
        user: Option<String>,
        since_ms: Option<i64>,
        max: usize,
    ) -> Result<Vec<crate::api::JobView>, ClientError> {
        self.history_of(user, since_ms, None, max).await
    }

    /// [`Client::history`] of only the jobs `ids` names (comma-separated; an array's id
    /// names all its tasks), found by the database's index however long the history is.
    pub async fn history_of(
        &self,
        user: Option<String>,
        since_ms: Option<i64>,
        ids: Option<String>,
        max: usize,
    ) -> Result<Vec<crate::api::JobView>, ClientError> {
        use crate::api::{HISTORY_PAGE, HistoryPage, HistoryQuery};
        let mut jobs = Vec::new();
        let mut after = None;
        while jobs.len() < max {
            let query = HistoryQuery {
                user: user.clone(),
                since_ms,
                limit: Some((max - jobs.len()).min(HISTORY_PAGE as usize) as u32),
                after,
                ids: ids.clone(),
            };
            let page: HistoryPage = self.get_query("/v1/history", &query).await?;
            jobs.extend(page.jobs);
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        Ok(jobs)
    }

    /// `POST path` with a JSON body.
    pub async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let bytes = serde_json::to_vec(body).map_err(|e| ClientError::Http(e.to_string()))?;
        self.call(Method::POST, path, Some(bytes)).await
    }

    /// `GET path` turned into a tunnel ([`crate::tunnel`]): the byte stream once the controller
    /// switched protocols, or its refusal as an error.
    pub async fn tunnel(&self, path: &str) -> Result<hyper::upgrade::Upgraded, ClientError> {
        let stream =
            UnixStream::connect(&self.socket)
                .await
                .map_err(|error| ClientError::Connect {
                    socket: self.socket.clone(),
                    error,
                })?;
        let req =
            crate::tunnel::with_upgrade(Request::builder().uri(path).header("host", "labpool"))
                .body(crate::tunnel::empty())
                .map_err(|e| ClientError::Http(e.to_string()))?;
        match crate::http1::upgrade(stream, req)
            .await
            .map_err(|e| ClientError::Http(e.to_string()))?
        {
            crate::http1::Upgrade::Switched(u) => Ok(u),
            crate::http1::Upgrade::Refused(status, bytes) => Err(ClientError::Api {
                status: status.as_u16(),
                body: serde_json::from_slice::<ErrorBody>(&bytes).unwrap_or_else(|_| ErrorBody {
                    error: format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes)),
                    hint: None,
                }),
            }),
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<T, ClientError> {
        let stream =
            UnixStream::connect(&self.socket)
                .await
                .map_err(|error| ClientError::Connect {
                    socket: self.socket.clone(),
                    error,
                })?;
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "labpool");
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| ClientError::Http(e.to_string()))?;
        let (status, bytes) = crate::http1::exchange(stream, req, MAX_ANSWER)
            .await
            .map_err(|e| ClientError::Http(e.to_string()))?;
        if status != StatusCode::OK {
            let body = serde_json::from_slice::<ErrorBody>(&bytes).unwrap_or_else(|_| ErrorBody {
                error: format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes)),
                hint: None,
            });
            return Err(ClientError::Api {
                status: status.as_u16(),
                body,
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))
    }
}

/// `path?query`, form-encoded; `path` alone when every field is `None`.
fn with_query<Q: Serialize>(path: &str, query: &Q) -> Result<String, ClientError> {
    let q = serde_urlencoded::to_string(query).map_err(|e| ClientError::Http(e.to_string()))?;
    Ok(if q.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{q}")
    })
}

#[cfg(test)]
mod tests {
    use super::with_query;
    use crate::api::{HistoryQuery, JobsQuery};

    #[test]
    fn query_values_are_escaped_and_read_back_as_typed() {
        let q = JobsQuery {
            user: Some("a&b c=d".into()),
        };
        let uri = with_query("/v1/jobs", &q).unwrap();
        assert_eq!(uri, "/v1/jobs?user=a%26b+c%3Dd");
        let back: JobsQuery = serde_urlencoded::from_str(uri.split_once('?').unwrap().1).unwrap();
        assert_eq!(back.user.as_deref(), Some("a&b c=d"));
        assert_eq!(
            with_query("/v1/jobs", &JobsQuery { user: None }).unwrap(),
            "/v1/jobs"
        );
        let h = HistoryQuery {
            user: None,
            since_ms: Some(5),
            limit: Some(10),
            after: None,
            ids: None,
        };
        assert_eq!(
            with_query("/v1/history", &h).unwrap(),
            "/v1/history?since_ms=5&limit=10"
        );
    }
}
