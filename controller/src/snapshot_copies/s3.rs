//! An S3-compatible bucket as a copy's store (AWS, MinIO, Ceph RGW, Garage…): requests signed
//! with presigned URLs (`rusty-s3`, AWS Signature V4) and sent with labpool's one HTTP/1 client,
//! over TLS for `https://` endpoints (rustls, Mozilla's roots). Path-style URLs, which every
//! S3-compatible server takes. One TLS configuration serves every request of a store, so later
//! connections resume the first one's TLS session instead of a full handshake each; error
//! documents are read with the XML parser rusty-s3 uses (`instant-xml`).

use crate::http1::exchange;
use http_body_util::Full;
use hyper::body::Bytes;
use instant_xml::FromXml;
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
    /// Built once: its session cache lets each new connection resume TLS.
    tls: Arc<rustls::ClientConfig>,
}

/// The error document an S3 server answers a failed request with.
#[derive(Debug, FromXml)]
#[xml(rename = "Error")]
struct S3Error {
    #[xml(rename = "Code")]
    code: Option<String>,
    #[xml(rename = "Message")]
    message: Option<String>,
}

/// `NoSuchBucket (The specified bucket does not exist)`, from an error document; empty when
/// the answer is not one.
fn error_text(body: &str) -> String {
    match instant_xml::from_str::<S3Error>(body.trim_start_matches(|c: char| c != '<')) {
        Ok(S3Error {
            code: Some(code),
            message,
        }) => match message {
            Some(m) => format!("{code} ({m})"),
            None => code,
        },
        _ => String::new(),
    }
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
            tls: tls_config(),
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
                let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
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
        let code = error_text(&String::from_utf8_lossy(&body));
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

#[cfg(test)]
mod tests {
    use super::error_text;

    #[test]
    fn an_error_document_is_read_for_its_code_and_message() {
        let minio = r#"<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message><BucketName>lab</BucketName><Resource>/lab/x</Resource><RequestId>17A</RequestId><HostId>dd9</HostId></Error>"#;
        assert_eq!(
            error_text(minio),
            "NoSuchBucket (The specified bucket does not exist)"
        );
        assert_eq!(
            error_text("<Error><Code>AccessDenied</Code></Error>"),
            "AccessDenied"
        );
        assert_eq!(error_text("<html>502 Bad Gateway</html>"), "");
        assert_eq!(error_text(""), "");
    }
}
