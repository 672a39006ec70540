//! The one HTTP/1.1 client core behind the CLI's Unix-socket client ([`crate::client`]), the
//! signed transport between nodes ([`crate::transport`]) and the alert webhook
//! ([`crate::webhook`]): one request over one fresh connection, the whole answer back. Each
//! caller builds its request (headers, signature) and says what an error means to its user.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

/// Sends `req` over `stream` and returns the status and the whole body.
pub async fn exchange<S>(
    stream: S,
    req: Request<Full<Bytes>>,
) -> Result<(StatusCode, Bytes), hyper::Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, body))
}
