//! The alert webhook: a JSON body POSTed to `[alerts] webhook` (plain HTTP; a relay on the
//! same host can forward to chat or mail). A failed post is logged, never retried in a loop.

use anyhow::Context;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request};
use std::time::Duration;
use tokio::net::TcpStream;

/// Posts `body` to `url` (`http://host:port/path`), with a 10 s limit.
pub async fn post(url: &str, body: &serde_json::Value) -> anyhow::Result<()> {
    tokio::time::timeout(Duration::from_secs(10), post_inner(url, body))
        .await
        .with_context(|| format!("the alert webhook {url} did not answer in 10 s"))?
}

async fn post_inner(url: &str, body: &serde_json::Value) -> anyhow::Result<()> {
    let uri: hyper::Uri = url
        .parse()
        .with_context(|| format!("bad webhook URL {url}"))?;
    let host = uri.host().context("the webhook URL has no host")?;
    let port = uri.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((host, port))
        .await
        .with_context(|| format!("cannot connect to the alert webhook {url}"))?;
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let req = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header("host", format!("{host}:{port}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(body)?)))?;
    let (status, _) = crate::http1::exchange(stream, req, 1 << 20)
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    anyhow::ensure!(
        status.is_success(),
        "the alert webhook {url} answered HTTP {status}"
    );
    Ok(())
}
