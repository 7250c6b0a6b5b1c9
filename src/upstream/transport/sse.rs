//! The 2024-11-05 HTTP+SSE transport toward upstreams that only speak it: one
//! GET stream per session carries every message from the server (responses
//! included); messages to the server are POSTed to the URL its `endpoint`
//! event names. Like every transport it reports to its session through
//! [`Inbound`] and never looks inside the messages it carries.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use tokio::task::AbortHandle;

use super::refusal::{Held, IdFinder, Refused, fail_answered};
use super::streamable_http::Endpoint;
use super::{Inbound, send_authorized};
use crate::discard::{DiscardBounds, discard};
use crate::protocol::Message;
use crate::protocol::sse::{SseError, SseParser};
use crate::upstream::credentials::Subject;
use crate::upstream::error::UpstreamError;

/// Largest SSE event accepted from an upstream.
const MAX_EVENT: usize = 64 * 1024 * 1024;

/// One HTTP+SSE session: the open GET stream and the POST endpoint it named.
pub(crate) struct SseLink {
    /// The stream's endpoint: its client and credentials.
    stream: Arc<Endpoint>,
    subject: Option<Arc<Subject>>,
    endpoint: Uri,
    upstream: Arc<str>,
    /// The task reading the GET stream; a std mutex, set once after attach.
    reader: Mutex<Option<AbortHandle>>,
}

/// The connected stream before a session is attached to it.
pub(crate) struct PendingSse {
    link: SseLink,
    body: hyper::body::Incoming,
    parser: SseParser,
}

impl SseLink {
    /// Opens the GET stream on `stream` (with its credential, for `subject` under
    /// token exchange) and waits (up to `timeout`) for its `endpoint` event.
    pub(crate) async fn connect(
        stream: &Arc<Endpoint>,
        subject: Option<Arc<Subject>>,
        upstream: Arc<str>,
        timeout: Duration,
    ) -> Result<PendingSse, UpstreamError> {
        let unavailable = |reason: String| UpstreamError::Unavailable {
            upstream: upstream.to_string(),
            reason,
        };
        let url = stream.url.clone();
        let get = || {
            http::Request::builder()
                .method(Method::GET)
                .uri(url.clone())
                .header(ACCEPT, "text/event-stream")
                .body(Full::new(Bytes::new()))
                .map_err(|e| e.to_string())
        };
        let sent = send_authorized(&stream.client, &stream.credentials, subject.as_deref(), get);
        let response = tokio::time::timeout(timeout, sent)
            .await
            .map_err(|_| unavailable("no answer to the SSE GET".into()))?
            .map_err(unavailable)?;
        if response.status() != StatusCode::OK {
            return Err(unavailable(format!("SSE GET answered {}", response.status())));
        }
        let mut body = response.into_body();
        let mut parser = SseParser::new(MAX_EVENT);
        let endpoint = tokio::time::timeout(timeout, async {
            loop {
                if let Some(event) = parser.next_event().map_err(|e| e.to_string())?
                    && event.event == "endpoint"
                {
                    return Ok::<String, String>(event.data);
                }
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Ok(chunk) = frame.into_data() {
                            parser.push(&chunk);
                        }
                    }
                    Some(Err(e)) => return Err(e.to_string()),
                    None => return Err("the stream ended before its endpoint event".into()),
                }
            }
        })
        .await
        .map_err(|_| unavailable("no endpoint event".into()))?
        .map_err(unavailable)?;
        let endpoint = resolve(&url, &endpoint).ok_or_else(|| unavailable(format!("bad endpoint {endpoint:?}")))?;
        if !same_origin(&url, &endpoint) {
            // Posts carry every client message: they go nowhere the operator did not configure.
            return Err(unavailable(format!(
                "the endpoint event names {endpoint}, another origin than the SSE URL {url}; refused"
            )));
        }
        let link = SseLink {
            stream: stream.clone(),
            subject,
            endpoint,
            upstream,
            reader: Mutex::new(None),
        };
        Ok(PendingSse { link, body, parser })
    }

    pub(crate) async fn send<S: Inbound>(&self, session: &S, message: Message) -> Result<(), UpstreamError> {
        let body = Bytes::from(message.to_bytes());
        let post = || {
            http::Request::builder()
                .method(Method::POST)
                .uri(self.endpoint.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(Full::new(body.clone()))
                .map_err(|e| e.to_string())
        };
        let (client, credentials) = (&self.stream.client, &self.stream.credentials);
        let response = send_authorized(client, credentials, self.subject.as_deref(), post)
            .await
            .map_err(|e| self.unavailable(e))?;
        let status = response.status();
        discard(response.into_body(), DiscardBounds::UPSTREAM).await;
        if status.is_success() {
            Ok(())
        } else {
            if status == StatusCode::NOT_FOUND {
                session.handle_closed("the upstream forgot the SSE session (404)");
            }
            Err(self.unavailable(format!("POST answered {status}")))
        }
    }

    pub(crate) fn stop(&self) {
        if let Some(reader) = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take() {
            reader.abort();
        }
    }

    fn unavailable(&self, reason: String) -> UpstreamError {
        UpstreamError::Unavailable {
            upstream: self.upstream.to_string(),
            reason,
        }
    }
}

impl Drop for SseLink {
    fn drop(&mut self) {
        self.stop();
    }
}

impl PendingSse {
    /// The link, and a function that starts routing the stream into a session.
    pub(crate) fn split(self) -> (SseLink, SseReader) {
        let PendingSse { link, body, parser } = self;
        let upstream = link.upstream.clone();
        (link, SseReader { body, parser, upstream })
    }
}

/// The read half of an HTTP+SSE session.
pub(crate) struct SseReader {
    body: hyper::body::Incoming,
    parser: SseParser,
    upstream: Arc<str>,
}

impl SseReader {
    /// Routes every event into `session` until the stream ends, then closes it.
    /// Returns the reader task's handle so the link can stop it. An event refused
    /// for its values fails the request it answers at once; one past the size
    /// bound, or past the shared bound on bytes held for upstream messages, ends
    /// the stream (one stream carries every answer: it cannot be read past it),
    /// failing every request waiting on it at once with the reason.
    pub(crate) fn start<S: Inbound>(self, session: Weak<S>) -> AbortHandle {
        let SseReader {
            mut body,
            mut parser,
            upstream,
        } = self;
        let task = tokio::spawn(async move {
            let mut held = Held::default();
            let reason = loop {
                loop {
                    match parser.next_event() {
                        Ok(Some(event)) if event.event.is_empty() || event.event == "message" => {
                            let Some(session) = session.upgrade() else { return };
                            match Message::parse_within(event.data.as_bytes(), super::message_bounds()) {
                                Ok(message) => session.handle_message(message, None),
                                Err(error) => {
                                    let mut finder = IdFinder::default();
                                    finder.feed(event.data.as_bytes());
                                    let refused = Refused::Unreadable(error.to_string());
                                    fail_answered(&*session, &upstream, &refused, &finder.finish());
                                }
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(error) => {
                            let reason = match error {
                                SseError::TooLarge(limit) => {
                                    let refused = Refused::TooLarge { limit };
                                    refused.count();
                                    refused.reason()
                                }
                                other => other.to_string(),
                            };
                            if let Some(session) = session.upgrade() {
                                session.handle_closed(&reason);
                            }
                            return;
                        }
                    }
                }
                // Only what is left unread is held now: fewer bytes, so this cannot fail.
                let _ = held.fit(parser.held_bytes());
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Ok(chunk) = frame.into_data() {
                            parser.push(&chunk);
                        }
                        if let Err(exhausted) = held.fit(parser.held_bytes()) {
                            let refused = Refused::from(exhausted);
                            refused.count();
                            break refused.reason();
                        }
                    }
                    Some(Err(error)) => break error.to_string(),
                    None => break "the SSE stream ended".to_owned(),
                }
            };
            if let Some(session) = session.upgrade() {
                session.handle_closed(&reason);
            }
        });
        task.abort_handle()
    }
}

impl SseLink {
    /// Records the reader task so stopping the link stops it.
    pub(crate) fn set_reader(&self, reader: AbortHandle) {
        *self.reader.lock().unwrap_or_else(|e| e.into_inner()) = Some(reader);
    }
}

/// Resolves the `endpoint` event's URI (usually relative) against the stream's URL.
fn resolve(base: &Uri, endpoint: &str) -> Option<Uri> {
    let endpoint = endpoint.trim();
    if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
        return endpoint.parse().ok();
    }
    let scheme = base.scheme_str()?;
    let authority = base.authority()?;
    let path = if endpoint.starts_with('/') {
        endpoint.to_owned()
    } else {
        let base_path = base.path();
        let dir = base_path.rsplit_once('/').map_or("", |(dir, _)| dir);
        format!("{dir}/{endpoint}")
    };
    format!("{scheme}://{authority}{path}").parse().ok()
}

/// Whether two URIs share scheme, host and port (the scheme's default when absent).
fn same_origin(a: &Uri, b: &Uri) -> bool {
    fn origin(uri: &Uri) -> Option<(String, String, u16)> {
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let default = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let host = uri.host()?.to_ascii_lowercase();
        Some((scheme, host, uri.port_u16().unwrap_or(default)))
    }
    matches!((origin(a), origin(b)), (Some(a), Some(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_endpoints_of_the_streams_own_origin_are_accepted() {
        let base: Uri = "http://127.0.0.1:3002/sse".parse().unwrap();
        let same = ["/messages/?session_id=ab", "m?x=1", "http://127.0.0.1:3002/m"];
        for endpoint in same {
            let resolved = resolve(&base, endpoint).unwrap();
            assert!(same_origin(&base, &resolved), "{endpoint}");
        }
        let foreign = [
            "http://127.0.0.1:9/m",
            "https://127.0.0.1:3002/m",
            "http://evil.example:3002/m",
            "http://localhost:3002/m",
        ];
        for endpoint in foreign {
            let resolved = resolve(&base, endpoint).unwrap();
            assert!(!same_origin(&base, &resolved), "{endpoint}");
        }
        let implicit: Uri = "https://h.example/sse".parse().unwrap();
        assert!(same_origin(&implicit, &"https://h.example:443/m".parse().unwrap()));
    }

    #[test]
    fn endpoints_resolve_like_the_sdks_do() {
        let base: Uri = "http://127.0.0.1:3002/sse".parse().unwrap();
        let cases = [
            (
                "/messages/?session_id=ab",
                "http://127.0.0.1:3002/messages/?session_id=ab",
            ),
            ("/message?sessionId=1", "http://127.0.0.1:3002/message?sessionId=1"),
            ("messages?x=1", "http://127.0.0.1:3002/messages?x=1"),
            ("http://127.0.0.1:9/m", "http://127.0.0.1:9/m"),
        ];
        for (endpoint, expected) in cases {
            assert_eq!(resolve(&base, endpoint).unwrap().to_string(), expected, "{endpoint}");
        }
    }
}
