//! HTTP between nodes, signed with the cluster key: the client every agent and the controller
//! use to call each other, and the server-side check that refuses unsigned, wrongly keyed,
//! skewed and replayed requests. The signing itself is in `labpool-cluster`.
//!
//! The vouched uid: an agent forwarding a member's CLI request signs it with the uid the kernel
//! gave for the member's Unix-socket connection (SO_PEERCRED); the controller takes that uid as
//! the caller, exactly as if the member had connected to its own socket (munge's model).
//! Requests an agent makes for itself carry no uid.

use crate::api::ErrorBody;
use crate::socket::Peer;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::Full;
use http_body_util::{BodyExt, Limited};
use hyper::body::Bytes;
use labpool_cluster::sign::headers;
use labpool_cluster::{AuthError, ClusterKey, Head, Signature, Verifier, body_sha256};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpStream;

/// Environment variable that shifts this process's clock for signing and checking, in
/// milliseconds (e.g. `-600000`): the test hook for the clock-skew refusal, so no test has to
/// touch the system clock. Never set it in production.
pub const CLOCK_OFFSET_ENV: &str = crate::env_vars::LABPOOL_TEST_CLOCK_OFFSET_MS;

/// This node's clock as it signs and checks requests (the wall clock, plus the test offset).
pub fn cluster_now_ms() -> i64 {
    let offset = std::env::var(CLOCK_OFFSET_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or(0);
    crate::clock::now_ms() + offset
}

/// 64 random bits (nonces, link and agent ids), from the kernel's random source. A machine
/// without one cannot make nonces that others cannot guess: that is a fault to stop on, not to
/// paper over with the pid and the time.
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).expect("the kernel's random source is readable");
    u64::from_le_bytes(b)
}

/// Largest answer a node takes from another (a delta of a 256 MiB file fits); requests have
/// smaller limits ([`signed_body_limit`]).
pub const MAX_SIGNED_BODY: usize = 300 << 20;

/// Why a call to another node failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Nothing answered at the address.
    #[error("cannot reach {addr}: {source}")]
    Connect {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The connection broke, or did not answer in time.
    #[error("talking to {addr} failed: {message}")]
    Http {
        /// The address.
        addr: String,
        /// What happened.
        message: String,
    },
    /// The other side refused, with its reason.
    #[error("{addr} refused {path} (HTTP {status}): {}{}", .body.error, .body.hint.as_ref().map(|h| format!("\nhint: {h}")).unwrap_or_default())]
    Refused {
        /// The address.
        addr: String,
        /// The path.
        path: String,
        /// HTTP status.
        status: u16,
        /// Its message.
        body: ErrorBody,
    },
}

impl CallError {
    /// True when the other side refused our signature (a wrong key or a skewed clock): retrying
    /// will not help until an admin acts.
    pub fn is_auth(&self) -> bool {
        matches!(self, CallError::Refused { status: 401, .. })
    }

    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            CallError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A client that signs every request with the cluster key.
#[derive(Debug, Clone)]
pub struct SignedClient {
    key: ClusterKey,
    /// Random per process, so nonces never repeat across restarts.
    seed: u64,
    counter: Arc<AtomicU64>,
    timeout: Duration,
}

impl SignedClient {
    /// A client signing with `key`, giving up on a call after `timeout`.
    pub fn new(key: ClusterKey, timeout: Duration) -> SignedClient {
        SignedClient {
            key,
            seed: random_u64(),
            counter: Arc::default(),
            timeout,
        }
    }

    /// The same client with another timeout (stages move large bodies).
    pub fn with_timeout(&self, timeout: Duration) -> SignedClient {
        SignedClient {
            timeout,
            ..self.clone()
        }
    }

    /// The headers of a request signed now, and its body's hash.
    pub fn sign(
        &self,
        method: &str,
        path: &str,
        uid: Option<u32>,
        body: &[u8],
    ) -> (Signature, String) {
        let nonce = format!(
            "{:016x}-{:x}",
            self.seed,
            self.counter.fetch_add(1, Ordering::Relaxed)
        );
        let hash = body_sha256(body);
        let head = Head {
            method,
            path,
            body_sha256: &hash,
            uid,
        };
        (self.key.sign_head(&head, cluster_now_ms(), &nonce), hash)
    }

    /// Sends `method path` with `body` to `addr` (HOST:PORT), signed, vouching for `uid`.
    /// Returns the status and body of any answer below 400; a refusal is an error with the
    /// other side's message.
    pub async fn call(
        &self,
        addr: &str,
        method: &str,
        path: &str,
        uid: Option<u32>,
        body: Vec<u8>,
    ) -> Result<(u16, Vec<u8>), CallError> {
        let (status, bytes) = self.raw(addr, method, path, uid, body).await?;
        if status >= 400 {
            let body = serde_json::from_slice::<ErrorBody>(&bytes).unwrap_or_else(|_| ErrorBody {
                error: String::from_utf8_lossy(&bytes).into_owned(),
                hint: None,
            });
            return Err(CallError::Refused {
                addr: addr.to_string(),
                path: path.to_string(),
                status,
                body,
            });
        }
        Ok((status, bytes))
    }

    /// [`SignedClient::call`] with a JSON body and answer.
    pub async fn json<B: serde::Serialize, T: serde::de::DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        body: &B,
    ) -> Result<T, CallError> {
        let bytes = serde_json::to_vec(body).expect("a request serialises");
        let (_, answer) = self.call(addr, "POST", path, None, bytes).await?;
        serde_json::from_slice(&answer).map_err(|e| CallError::Http {
            addr: addr.to_string(),
            message: format!("unexpected answer to {path}: {e}"),
        })
    }

    /// Sends a signed request and returns whatever status and body come back.
    pub async fn raw(
        &self,
        addr: &str,
        method: &str,
        path: &str,
        uid: Option<u32>,
        body: Vec<u8>,
    ) -> Result<(u16, Vec<u8>), CallError> {
        let http = |message: String| CallError::Http {
            addr: addr.to_string(),
            message,
        };
        let req = self
            .signed_head(addr, method, path, uid, &body)
            // JSON for the API; Bytes handlers (peer deltas) take any type.
            .header("content-type", "application/json");
        let work = async {
            let stream = connect(addr).await?;
            let req = req
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| http(e.to_string()))?;
            let (status, bytes) = crate::http1::exchange(stream, req, MAX_SIGNED_BODY)
                .await
                .map_err(|e| http(e.to_string()))?;
            Ok((status.as_u16(), bytes.to_vec()))
        };
        self.timed(addr, work).await
    }

    /// A request to `addr` with its signature headers (and the vouched `uid`), for `body`.
    fn signed_head(
        &self,
        addr: &str,
        method: &str,
        path: &str,
        uid: Option<u32>,
        body: &[u8],
    ) -> hyper::http::request::Builder {
        let (sig, body_hash) = self.sign(method, path, uid, body);
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", addr)
            .header(headers::TIMESTAMP, sig.timestamp_ms.to_string())
            .header(headers::NONCE, &sig.nonce)
            .header(headers::SIGNATURE, &sig.mac)
            .header(headers::BODY_SHA256, &body_hash);
        if let Some(uid) = uid {
            req = req.header(headers::UID, uid.to_string());
        }
        req
    }

    /// `work` with the client's timeout: past it, an error that says so.
    async fn timed<T>(
        &self,
        addr: &str,
        work: impl Future<Output = Result<T, CallError>>,
    ) -> Result<T, CallError> {
        match tokio::time::timeout(self.timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(CallError::Http {
                addr: addr.to_string(),
                message: format!(
                    "no answer within {}",
                    labpool_units::format_duration(self.timeout)
                ),
            }),
        }
    }
}

/// A connection to `addr`, with Nagle off (requests are small and waited for).
async fn connect(addr: &str) -> Result<TcpStream, CallError> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|source| CallError::Connect {
            addr: addr.to_string(),
            source,
        })?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

impl SignedClient {
    /// `GET path` on `addr`, signed (vouching for `uid`), turned into a tunnel
    /// ([`crate::tunnel`]): the byte stream once the other side switched protocols; a refusal
    /// is an error with its message.
    pub async fn tunnel(
        &self,
        addr: &str,
        path: &str,
        uid: Option<u32>,
    ) -> Result<hyper::upgrade::Upgraded, CallError> {
        let http = |message: String| CallError::Http {
            addr: addr.to_string(),
            message,
        };
        let req = crate::tunnel::with_upgrade(self.signed_head(addr, "GET", path, uid, &[]));
        let work = async {
            let stream = connect(addr).await?;
            let req = req
                .body(crate::tunnel::empty())
                .map_err(|e| http(e.to_string()))?;
            match crate::http1::upgrade(stream, req)
                .await
                .map_err(|e| http(e.to_string()))?
            {
                crate::http1::Upgrade::Switched(u) => Ok(u),
                crate::http1::Upgrade::Refused(status, bytes) => Err(CallError::Refused {
                    addr: addr.to_string(),
                    path: path.to_string(),
                    status: status.as_u16(),
                    body: serde_json::from_slice::<ErrorBody>(&bytes).unwrap_or_else(|_| {
                        ErrorBody {
                            error: String::from_utf8_lossy(&bytes).into_owned(),
                            hint: None,
                        }
                    }),
                }),
            }
        };
        self.timed(addr, work).await
    }
}

/// Who signed a request, as the server-side check found it.
#[derive(Debug, Clone, Copy)]
pub struct Signed {
    /// The vouched uid, when the request forwards a member's.
    pub uid: Option<u32>,
    /// The connection's address.
    pub from: SocketAddr,
}

/// The server side's verifier, shared by connections.
pub type SharedVerifier = Arc<Mutex<Verifier>>;

/// The largest body a signed request to `path` may carry: registrations and heartbeats are
/// small; reports, orders, peer requests (an rsync signature) and members' forwarded API calls
/// stay within the members' API limit.
pub fn signed_body_limit(path: &str) -> usize {
    match path {
        "/v1/agent/register" => 64 << 10,
        // GPU readings ride along (at most `labpool_agent::daemon::SAMPLES_KEPT` of them).
        "/v1/agent/heartbeat" => 1 << 20,
        // A pack of the snapshot repository (about 32 MiB) on its way to a node's copy.
        "/v1/agent/copy/file" => 128 << 20,
        _ => crate::api::MAX_BODY_BYTES,
    }
}

/// Axum middleware: refuses a request whose signature does not check out (401, with what to
/// do), and otherwise passes it on with [`Signed`] and the vouched uid as the caller.
///
/// The signature covers the body's hash, which comes in a header: the signature, the time and
/// the nonce are checked from the headers alone, so an unsigned or wrongly keyed request is
/// refused before a byte of its body is read. A signed body is then read up to the route's
/// limit ([`signed_body_limit`]) and must have the hash that was signed.
pub async fn verify_signed(
    State(verifier): State<SharedVerifier>,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    req: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = req.into_parts();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let uid = match header(headers::UID).map(|u| u.parse::<u32>()) {
        None => None,
        Some(Ok(u)) => Some(u),
        Some(Err(_)) => {
            return error_response(StatusCode::BAD_REQUEST, "a bad uid header".into(), None);
        }
    };
    let refuse = |path: &str, e: AuthError| {
        tracing::warn!(%from, path, "refused a request: {e}");
        error_response(StatusCode::UNAUTHORIZED, e.to_string(), None)
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_string(), |p| p.as_str().to_string());
    let (sig, body_hash) = match (
        header(headers::TIMESTAMP).and_then(|t| t.parse::<i64>().ok()),
        header(headers::NONCE),
        header(headers::SIGNATURE),
        header(headers::BODY_SHA256),
    ) {
        (Some(timestamp_ms), Some(nonce), Some(mac), Some(hash)) => (
            Signature {
                timestamp_ms,
                nonce,
                mac,
            },
            hash,
        ),
        _ => {
            let e = AuthError::Unsigned("the signature headers are missing".to_string());
            return refuse(&path, e);
        }
    };
    let checked = verifier.lock().expect("not poisoned").verify_head(
        &Head {
            method: parts.method.as_str(),
            path: &path,
            body_sha256: &body_hash,
            uid,
        },
        &sig,
        cluster_now_ms(),
    );
    if let Err(e) = checked {
        return refuse(&path, e);
    }
    let limit = signed_body_limit(parts.uri.path());
    let bytes = match Limited::new(body, limit).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let too_big = e.is::<http_body_util::LengthLimitError>();
            let (status, error) = if too_big {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the body is larger than {} ({}); this route takes at most that",
                        labpool_units::format_size(limit as u64),
                        parts.uri.path()
                    ),
                )
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the body: {e}"),
                )
            };
            tracing::warn!(%from, path, "refused a request: {error}");
            return error_response(status, error, None);
        }
    };
    if body_sha256(&bytes) != body_hash {
        let e = AuthError::Unsigned("the body is not the one that was signed".to_string());
        return refuse(&path, e);
    }
    parts.extensions.insert(Signed { uid, from });
    parts.extensions.insert(ConnectInfo(Peer { uid }));
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// An error answer between nodes: the status, and the JSON body the CLI and agents read.
pub fn error_response(status: StatusCode, error: String, hint: Option<String>) -> Response {
    (status, axum::Json(ErrorBody { error, hint })).into_response()
}
