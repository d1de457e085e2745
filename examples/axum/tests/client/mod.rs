//! The example's app on `127.0.0.1:<free port>` and a real HTTP client for it
//! (hyper's), shared by the tests of this folder.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::axum_example::{Library, LibraryCache, app};

/// Branch 1's token.
pub const CENTRAL: &str = "central-token";
/// Branch 2's tokens: two members.
pub const BAHCELIEVLER: &str = "bahcelievler-token";
pub const BAHCELIEVLER_2: &str = "bahcelievler-2-token";
/// Branch 3's token.
pub const KADIKOY: &str = "kadikoy-token";

/// A running app and a client for it.
pub struct Server<C> {
    pub url: String,
    pub library: Arc<Library<C>>,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// An answer: status, headers, body.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    /// A header as text ("" when absent).
    pub fn header(&self, name: impl header::AsHeaderName) -> &str {
        self.headers
            .get(name)
            .map_or("", |value| value.to_str().unwrap())
    }

    /// The titles of a list of books.
    pub fn titles(&self) -> Vec<String> {
        let json = self.json();
        let list = json.as_array().expect("a list");
        list.iter()
            .map(|book| book["title"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// Serves `library` on a free loopback port.
pub async fn start<C: LibraryCache>(library: Library<C>) -> Server<C> {
    let library = Arc::new(library);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free loopback port");
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = app(Arc::clone(&library));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server {
        url,
        library,
        client: Client::builder(TokioExecutor::new()).build_http(),
    }
}

impl<C> Server<C> {
    /// `method path` with `headers` and `body`.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(header::HeaderName, &str)],
        body: &str,
    ) -> Reply {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.url));
        for (name, value) in headers {
            request = request.header(name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap();
        let response = self
            .client
            .request(request)
            .await
            .expect("the server answers");
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            headers,
            body,
        }
    }

    /// `GET path` as the member of `token` (`None`: no `Authorization`),
    /// with `If-None-Match: if_none_match` when given.
    pub async fn get(&self, token: Option<&str>, path: &str, if_none_match: Option<&str>) -> Reply {
        let bearer = token.map(|token| format!("Bearer {token}"));
        let mut headers = Vec::new();
        if let Some(bearer) = &bearer {
            headers.push((header::AUTHORIZATION, bearer.as_str()));
        }
        if let Some(tag) = if_none_match {
            headers.push((header::IF_NONE_MATCH, tag));
        }
        self.send(Method::GET, path, &headers, "").await
    }

    /// `GET path` as `token`'s member, which must answer 200.
    pub async fn ok(&self, token: &str, path: &str) -> Reply {
        let reply = self.get(Some(token), path, None).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "{path}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        reply
    }

    /// `/metrics`, parsed: each sample's `name{labels}` and value.
    pub async fn metrics(&self) -> HashMap<String, f64> {
        let reply = self.get(None, "/metrics", None).await;
        assert_eq!(reply.status, StatusCode::OK);
        let text = String::from_utf8(reply.body.to_vec()).unwrap();
        text.lines()
            .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
            .map(|line| {
                let (series, value) = line.rsplit_once(' ').expect("`series value`");
                (series.to_owned(), value.parse().expect("a number"))
            })
            .collect()
    }
}
