//! HTTP(S) requests toward the authorization server: discovery documents, the
//! JWKS, introspection, and (as an OAuth client of an upstream's server) token
//! requests and registration. Bounded in time and size; never carries a client's token.
//!
//! TLS is rustls with the ring provider and the webpki roots (or only a configured
//! CA), chosen explicitly so that no second crypto provider can be picked up at run time.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Largest document accepted from the authorization server.
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// Why a request to the authorization server failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The URL cannot be requested.
    #[error("invalid URL {0}")]
    Url(String),
    /// No answer: connection refused, DNS, TLS, or a reset.
    #[error("{url}: {reason}")]
    Unreachable {
        /// What was requested.
        url: String,
        /// Why it failed.
        reason: String,
    },
    /// No answer within the configured timeout.
    #[error("{0}: no answer in time")]
    TimedOut(String),
    /// An answer that is not a success.
    #[error("{url}: HTTP {status}{}", in_parentheses(.said.as_deref()))]
    Status {
        /// What was requested.
        url: String,
        /// The status received.
        status: u16,
        /// The OAuth error the body names (RFC 6749 §5.2 `error`, with its
        /// `error_description`), when it is one.
        said: Option<String>,
    },
    /// An answer over the size bound, or unreadable.
    #[error("{0}: unreadable or oversized body")]
    Body(String),
}

/// A successful answer.
#[derive(Clone, Debug)]
pub(crate) struct Fetched {
    /// The body.
    pub(crate) body: Bytes,
    /// The `max-age` of `Cache-Control` (`None` without one; zero for `no-store`/`no-cache`).
    pub(crate) max_age: Option<Duration>,
}

/// A small client for the authorization server.
#[derive(Clone)]
pub(crate) struct Fetcher {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl Fetcher {
    /// A client whose every request (connect to last byte) takes at most `timeout`,
    /// trusting the public roots, or only the PEM bundle `ca` when given.
    pub(crate) fn new(timeout: Duration, ca: Option<&Path>) -> Result<Fetcher, FetchError> {
        let tls = crate::tls::ClientTls { ca, identity: None }
            .config()
            .map_err(|e| FetchError::Url(format!("TLS setup: {e}")))?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Fetcher { client, timeout })
    }

    /// GETs a JSON document.
    pub(crate) async fn get(&self, url: &str) -> Result<Fetched, FetchError> {
        let request = http::Request::builder()
            .method(Method::GET)
            .uri(url)
            .header(ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|_| FetchError::Url(url.to_owned()))?;
        self.send(url, request).await
    }

    /// POSTs a form (`application/x-www-form-urlencoded`), with HTTP Basic
    /// credentials when `basic` is given; the JSON answer.
    pub(crate) async fn post_form(&self, url: &str, form: &str, basic: Option<&str>) -> Result<Fetched, FetchError> {
        let authorization = basic.map(|credentials| format!("Basic {credentials}"));
        let body = Bytes::from(form.to_owned());
        self.post(url, "application/x-www-form-urlencoded", body, authorization)
            .await
    }

    /// POSTs a JSON document (RFC 7591 registration), with a bearer token when `bearer`
    /// is given (an initial access token); the JSON answer (200 or 201).
    pub(crate) async fn post_json(
        &self,
        url: &str,
        body: Vec<u8>,
        bearer: Option<&str>,
    ) -> Result<Fetched, FetchError> {
        let authorization = bearer.map(|token| format!("Bearer {token}"));
        self.post(url, "application/json", Bytes::from(body), authorization)
            .await
    }

    /// POSTs `body` as `content_type`, asking for JSON, with `authorization` if given.
    async fn post(
        &self,
        url: &str,
        content_type: &'static str,
        body: Bytes,
        authorization: Option<String>,
    ) -> Result<Fetched, FetchError> {
        let mut builder = http::Request::builder()
            .method(Method::POST)
            .uri(url)
            .header(ACCEPT, "application/json")
            .header(CONTENT_TYPE, content_type);
        if let Some(value) = authorization {
            builder = builder.header(AUTHORIZATION, value);
        }
        let request = builder
            .body(Full::new(body))
            .map_err(|_| FetchError::Url(url.to_owned()))?;
        self.send(url, request).await
    }

    async fn send(&self, url: &str, request: http::Request<Full<Bytes>>) -> Result<Fetched, FetchError> {
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| FetchError::Unreachable {
                    url: url.to_owned(),
                    reason: error_chain(&e),
                })?;
            let status = response.status();
            let max_age = max_age(response.headers());
            let body = Limited::new(response.into_body(), MAX_DOCUMENT_BYTES)
                .collect()
                .await
                .map_err(|_| FetchError::Body(url.to_owned()))?
                .to_bytes();
            if status != StatusCode::OK && status != StatusCode::CREATED {
                return Err(FetchError::Status {
                    url: url.to_owned(),
                    status: status.as_u16(),
                    said: oauth_error(&body),
                });
            }
            Ok(Fetched { body, max_age })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| FetchError::TimedOut(url.to_owned()))?
    }
}

/// Most characters of a server's error kept for a message.
const MAX_SAID_CHARS: usize = 200;

/// The OAuth error of a refusal's body (RFC 6749 §5.2: `error`, and
/// `error_description` when given), cut short and stripped of control characters,
/// since it ends up in logs and in the client's error.
fn oauth_error(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error")?.as_str()?;
    let text = match value.get("error_description").and_then(|d| d.as_str()) {
        Some(description) => format!("{error}: {description}"),
        None => error.to_owned(),
    };
    Some(text.chars().filter(|c| !c.is_control()).take(MAX_SAID_CHARS).collect())
}

fn in_parentheses(said: Option<&str>) -> String {
    said.map(|s| format!(" ({s})")).unwrap_or_default()
}

/// The freshness a `Cache-Control` header grants.
fn max_age(headers: &http::HeaderMap) -> Option<Duration> {
    let mut found = None;
    for value in headers.get_all(CACHE_CONTROL).iter().filter_map(|v| v.to_str().ok()) {
        for directive in value.split(',').map(str::trim) {
            let lower = directive.to_ascii_lowercase();
            if lower == "no-store" || lower == "no-cache" {
                return Some(Duration::ZERO);
            }
            if let Some(seconds) = lower.strip_prefix("max-age=")
                && let Ok(seconds) = seconds.trim_matches('"').parse::<u64>()
            {
                found = Some(Duration::from_secs(seconds));
            }
        }
    }
    found
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_servers_oauth_error() {
        let cases: [(&[u8], Option<&str>); 5] = [
            (br#"{"error":"invalid_client"}"#, Some("invalid_client")),
            (
                br#"{"error":"invalid_grant","error_description":"subject token expired"}"#,
                Some("invalid_grant: subject token expired"),
            ),
            (br#"{"error":"bad\nline"}"#, Some("badline")),
            (b"<html>502</html>", None),
            (br#"{"message":"nope"}"#, None),
        ];
        for (body, expected) in cases {
            assert_eq!(oauth_error(body).as_deref(), expected, "{body:?}");
        }
        let long = format!(r#"{{"error":"{}"}}"#, "x".repeat(1000));
        assert_eq!(oauth_error(long.as_bytes()).map(|s| s.len()), Some(200));
    }

    #[test]
    fn cache_control_max_age() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(max_age(&headers), None);
        headers.insert(CACHE_CONTROL, "public, max-age=600".parse().unwrap());
        assert_eq!(max_age(&headers), Some(Duration::from_secs(600)));
        headers.insert(CACHE_CONTROL, "no-store".parse().unwrap());
        assert_eq!(max_age(&headers), Some(Duration::ZERO));
    }
}
