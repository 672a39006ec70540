//! The one HTTP/1.1 client core behind the CLI's Unix-socket client ([`crate::client`]), the
//! signed transport between nodes ([`crate::transport`]) and the alert webhook
//! ([`crate::webhook`]): one request over one fresh connection, the whole answer back. Each
//! caller builds its request (headers, signature) and says what an error means to its user.

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

/// Why an exchange failed.
pub type ExchangeError = Box<dyn std::error::Error + Send + Sync>;

/// Sends `req` over `stream` and returns the status and the whole body, refusing an answer
/// larger than `max_answer` bytes (it is read as it comes, never past the limit).
pub async fn exchange<S>(
    stream: S,
    req: Request<Full<Bytes>>,
    max_answer: usize,
) -> Result<(StatusCode, Bytes), ExchangeError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let body = Limited::new(resp.into_body(), max_answer)
        .collect()
        .await
        .map_err(|e| -> ExchangeError {
            if e.is::<http_body_util::LengthLimitError>() {
                format!(
                    "the answer is larger than {}",
                    labpool_units::format_size(max_answer as u64)
                )
                .into()
            } else {
                e
            }
        })?
        .to_bytes();
    Ok((status, body))
}

/// The answer to an upgrade request: the byte stream both ways once the other side switched
/// protocols (101), or its status and body when it refused.
pub enum Upgrade {
    /// Switched: the connection is now the tunnel's.
    Switched(hyper::upgrade::Upgraded),
    /// Refused, with the status and the (bounded) body.
    Refused(StatusCode, Bytes),
}

/// Sends `req` (with the tunnel's upgrade headers, [`crate::tunnel::with_upgrade`]) over
/// `stream` and returns the upgraded connection, or the refusal.
pub async fn upgrade<S>(stream: S, req: Request<Full<Bytes>>) -> Result<Upgrade, ExchangeError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return Ok(Upgrade::Switched(hyper::upgrade::on(resp).await?));
    }
    let body = Limited::new(resp.into_body(), 1 << 20)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    Ok(Upgrade::Refused(status, body))
}
