//! An S3-compatible bucket as a copy's store (AWS, MinIO, Ceph RGW, Garage…): requests signed
//! with presigned URLs (`rusty-s3`, AWS Signature V4) and sent with labpool's one HTTP/1 client,
//! over TLS for `https://` endpoints (rustls, Mozilla's roots). Path-style URLs, which every
//! S3-compatible server takes.

use crate::http1::exchange;
use http_body_util::Full;
use hyper::body::Bytes;
use labpool_snapshots::copy::Store;
use labpool_snapshots::{Result, SnapshotError};
use rusty_s3::actions::ListObjectsV2;
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::runtime::Handle;

/// How long a signed URL is good for: one request, sent at once.
const SIGNED_FOR: Duration = Duration::from_secs(600);

/// The largest object read back (a pack is about 32 MiB).
const MAX_OBJECT: usize = 256 << 20;

/// A bucket, under a prefix.
pub struct S3Store {
    bucket: Bucket,
    credentials: Credentials,
    prefix: String,
    runtime: Handle,
}

impl S3Store {
    /// The store for `bucket` at `endpoint` (`http://127.0.0.1:9000`), keys under `prefix`.
    pub fn new(
        endpoint: &str,
        region: &str,
        bucket: &str,
        prefix: &str,
        credentials: Credentials,
        runtime: Handle,
    ) -> anyhow::Result<S3Store> {
        let url: url::Url = endpoint
            .parse()
            .map_err(|e| anyhow::anyhow!("endpoint {endpoint:?} is not a URL ({e})"))?;
        let bucket = Bucket::new(url, UrlStyle::Path, bucket.to_string(), region.to_string())
            .map_err(|e| anyhow::anyhow!("bucket {bucket:?} at {endpoint}: {e}"))?;
        let prefix = prefix.trim_matches('/');
        Ok(S3Store {
            bucket,
            credentials,
            prefix: if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix}/")
            },
            runtime,
        })
    }

    fn err(&self, what: String) -> SnapshotError {
        SnapshotError::Invalid(format!("{}: {what}", self.describe()))
    }

    /// Sends `method url` with `body`; the status and the answer.
    fn send(&self, method: &str, url: url::Url, body: Vec<u8>) -> Result<(u16, Vec<u8>)> {
        let work = async {
            let host = url.host_str().unwrap_or_default().to_string();
            let port = url.port_or_known_default().unwrap_or(80);
            let path = match url.query() {
                Some(q) => format!("{}?{q}", url.path()),
                None => url.path().to_string(),
            };
            let req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("host", url.authority())
                .header("content-length", body.len())
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| e.to_string())?;
            let tcp = TcpStream::connect((host.as_str(), port))
                .await
                .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
            let answer = if url.scheme() == "https" {
                let tls = tokio_rustls::TlsConnector::from(tls_config())
                    .connect(
                        rustls::pki_types::ServerName::try_from(host.clone())
                            .map_err(|e| e.to_string())?,
                        tcp,
                    )
                    .await
                    .map_err(|e| format!("TLS with {host}: {e}"))?;
                exchange(tls, req, MAX_OBJECT).await
            } else {
                exchange(tcp, req, MAX_OBJECT).await
            };
            answer
                .map(|(status, bytes)| (status.as_u16(), bytes.to_vec()))
                .map_err(|e| e.to_string())
        };
        self.runtime
            .block_on(tokio::time::timeout(Duration::from_secs(300), work))
            .map_err(|_| self.err(format!("{method} got no answer within 5 minutes")))?
            .map_err(|e| self.err(format!("{method}: {e}")))
    }

    fn ok(&self, what: &str, (status, body): (u16, Vec<u8>)) -> Result<Vec<u8>> {
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let text = String::from_utf8_lossy(&body);
        let code = text
            .split("<Code>")
            .nth(1)
            .and_then(|s| s.split("</Code>").next())
            .unwrap_or("");
        Err(self.err(format!(
            "{what} answered HTTP {status} {code}; check the bucket, the endpoint and the keys under [snapshots.s3]"
        )))
    }
}

fn tls_config() -> Arc<rustls::ClientConfig> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default versions")
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

impl Store for S3Store {
    fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket.name(), self.prefix)
    }

    fn list(&self) -> Result<BTreeMap<String, u64>> {
        let mut out = BTreeMap::new();
        let mut token: Option<String> = None;
        loop {
            let mut action = self.bucket.list_objects_v2(Some(&self.credentials));
            if !self.prefix.is_empty() {
                action.with_prefix(self.prefix.as_str());
            }
            if let Some(t) = &token {
                action.with_continuation_token(t.as_str());
            }
            let url = action.sign(SIGNED_FOR);
            let body = self.ok("listing", self.send("GET", url, Vec::new())?)?;
            let text = String::from_utf8_lossy(&body);
            let page = ListObjectsV2::parse_response(&text)
                .map_err(|e| self.err(format!("a listing that does not parse: {e}")))?;
            for o in page.contents {
                if let Some(key) = o.key.strip_prefix(self.prefix.as_str()) {
                    out.insert(key.to_string(), o.size.unwrap_or(0));
                }
            }
            match page.next_continuation_token {
                // A server that hands back the same token would page forever.
                Some(t) if token.as_ref() == Some(&t) => {
                    return Err(
                        self.err(format!("the listing repeats its continuation token {t:?}"))
                    );
                }
                Some(t) => token = Some(t),
                None => return Ok(out),
            }
        }
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        let object = format!("{}{key}", self.prefix);
        let url = self
            .bucket
            .get_object(Some(&self.credentials), &object)
            .sign(SIGNED_FOR);
        self.ok(
            &format!("reading {key}"),
            self.send("GET", url, Vec::new())?,
        )
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let object = format!("{}{key}", self.prefix);
        let url = self
            .bucket
            .put_object(Some(&self.credentials), &object)
            .sign(SIGNED_FOR);
        self.ok(
            &format!("writing {key}"),
            self.send("PUT", url, bytes.to_vec())?,
        )
        .map(drop)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let object = format!("{}{key}", self.prefix);
        let url = self
            .bucket
            .delete_object(Some(&self.credentials), &object)
            .sign(SIGNED_FOR);
        let answer = self.send("DELETE", url, Vec::new())?;
        if answer.0 == 404 {
            return Ok(());
        }
        self.ok(&format!("removing {key}"), answer).map(drop)
    }
}
