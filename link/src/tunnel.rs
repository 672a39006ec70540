//! A byte stream to a port of a running job, carried by the pool's own links: an HTTP/1.1
//! upgrade (`Upgrade: labpool-forward`) on the controller's Unix socket, on an agent's socket
//! for the CLI of its node, and on the signed link from the controller to the job's agent.
//! Nothing new listens on a node's network: each hop is a request its side already
//! authenticates (the kernel's uid on a socket, the cluster key between nodes).

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

/// The protocol named in the upgrade headers.
pub const PROTOCOL: &str = "labpool-forward";

/// True when `req` asks to be turned into a tunnel.
pub fn wants_upgrade(req: &Request) -> bool {
    req.headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case(PROTOCOL))
}

/// `req` with the headers that ask for the tunnel.
pub fn with_upgrade(req: hyper::http::request::Builder) -> hyper::http::request::Builder {
    req.header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, PROTOCOL)
}

/// Answers `req` by switching protocols, then joins its connection to `other` (the job's port,
/// or the next hop's tunnel) until either side closes.
pub fn switch_to<S>(mut req: Request, other: S) -> Response
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match upgrade.await {
            Ok(upgraded) => splice(TokioIo::new(upgraded), other).await,
            Err(e) => tracing::debug!("a forward's upgrade failed: {e}"),
        }
    });
    let mut resp = StatusCode::SWITCHING_PROTOCOLS.into_response();
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    resp.headers_mut()
        .insert(header::UPGRADE, HeaderValue::from_static(PROTOCOL));
    resp
}

/// Copies both ways between `a` and `b` until both are done.
pub async fn splice<A, B>(mut a: A, mut b: B)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
}

/// A byte stream both ways to a job's port.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A tunnel being opened: the stream, or the refusal's HTTP status and message.
pub type Opening = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Box<dyn Stream>, (u16, String)>> + Send>,
>;

/// How a part that does not import the controller (the dashboard) opens a tunnel to a job's
/// port as a member: the controller hands one over, checking what the API checks.
pub trait JobTunnels: Send + Sync {
    /// A tunnel to `port` of job `job`, for `uid`.
    fn open(&self, uid: u32, job: u64, port: u16) -> Opening;
}

/// An upgraded connection as a tokio byte stream.
pub fn io(upgraded: hyper::upgrade::Upgraded) -> TokioIo<hyper::upgrade::Upgraded> {
    TokioIo::new(upgraded)
}

/// An empty request body, for the upgrade requests.
pub fn empty() -> Full<Bytes> {
    Full::new(Bytes::new())
}
