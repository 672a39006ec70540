//! The dashboard reads and acts only through the controller's own API, called in-process as the
//! session's uid (the same way the agents forward a member's calls). So a page shows and does
//! exactly what the CLI would for that member, and no rule is written twice.

use crate::api::ErrorBody;
use crate::socket::Peer;
use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::http::{Method, Request, header};
use http_body_util::BodyExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tower::ServiceExt;

/// The API router, to call as someone.
#[derive(Clone)]
pub struct Api {
    router: Router,
}

/// What the API refused, as it said it.
#[derive(Debug, Clone)]
pub struct Refused {
    /// Its HTTP status.
    pub status: u16,
    /// What happened, and what to do next.
    pub body: ErrorBody,
}

impl Api {
    /// Calls into `router`: the controller's API router, handed over by the controller.
    pub fn new(router: Router) -> Api {
        Api { router }
    }

    /// `GET path`, as `uid`.
    pub async fn get<T: DeserializeOwned>(&self, uid: u32, path: &str) -> Result<T, Refused> {
        self.call(uid, Method::GET, path, Body::empty()).await
    }

    /// `GET path?query`, as `uid`.
    pub async fn get_query<Q: Serialize, T: DeserializeOwned>(
        &self,
        uid: u32,
        path: &str,
        query: &Q,
    ) -> Result<T, Refused> {
        let q = serde_urlencoded::to_string(query).map_err(|e| Refused {
            status: 500,
            body: ErrorBody {
                error: format!("cannot encode the query for {path}: {e}"),
                hint: None,
            },
        })?;
        let path = if q.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{q}")
        };
        self.get(uid, &path).await
    }

    /// `POST path` with a JSON body, as `uid`.
    pub async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        uid: u32,
        path: &str,
        body: &B,
    ) -> Result<T, Refused> {
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        self.call(uid, Method::POST, path, Body::from(bytes)).await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        uid: u32,
        method: Method,
        path: &str,
        body: Body,
    ) -> Result<T, Refused> {
        let failed = |error: String| Refused {
            status: 500,
            body: ErrorBody { error, hint: None },
        };
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|e| failed(format!("bad API path {path}: {e}")))?;
        req.extensions_mut()
            .insert(ConnectInfo(Peer { uid: Some(uid) }));
        let Ok(resp) = self.router.clone().oneshot(req).await;
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| failed(format!("reading the answer to {path}: {e}")))?
            .to_bytes();
        if status.is_success() {
            serde_json::from_slice(&bytes)
                .map_err(|e| failed(format!("the answer to {path} did not parse: {e}")))
        } else {
            let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| ErrorBody {
                error: String::from_utf8_lossy(&bytes).into_owned(),
                hint: None,
            });
            Err(Refused {
                status: status.as_u16(),
                body,
            })
        }
    }
}
