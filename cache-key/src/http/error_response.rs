//! [`CacheError`] as an HTTP response: a status a client can act on, never
//! the failure's detail (which goes to the service's logs).

use std::fmt::Display;

use axum_core::body::Body;
use axum_core::response::{IntoResponse, Response};
use http::StatusCode;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER};

use crate::cache::{CacheError, CacheErrorKind};

/// `503 Service Unavailable` (with `Retry-After: 1`) when the cache's
/// backend timed out or could not be reached and nothing answered around
/// it; `500 Internal Server Error` otherwise (an invalid key is a bug of
/// the service, an origin error the service's own failure). The body is
/// `{"error": "..."}` naming the kind only, and the response is
/// `Cache-Control: no-store`. With the `tracing` feature, the whole error
/// is an `ERROR` event.
impl<E: Display> IntoResponse for CacheError<E> {
    fn into_response(self) -> Response {
        let kind = self.kind();
        #[cfg(feature = "tracing")]
        match &self {
            CacheError::Origin(origin) => {
                tracing::error!(kind = ?kind, error = %origin, "the origin failed")
            }
            other => tracing::error!(kind = ?kind, error = %other, "the cache failed"),
        }
        let (status, text) = match kind {
            CacheErrorKind::Timeout | CacheErrorKind::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "the service is unavailable",
            ),
            CacheErrorKind::Origin => (StatusCode::INTERNAL_SERVER_ERROR, "the data source failed"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
        };
        let mut response = Response::new(Body::from(format!("{{\"error\":\"{text}\"}}")));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}
