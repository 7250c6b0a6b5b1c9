//! A request in flight on an upstream session, as its caller holds it: the
//! [`Call`] handle, the [`CallStep`]s it yields, and what dropping it means.
//!
//! The session keeps a table of its calls in flight (`session/table.rs`);
//! each call's answer arrives through its slot (`session/slot.rs`). Toward a
//! Streamable HTTP endpoint the call also drives the POST its transport made
//! for it while it is waited on (no task per request); nothing here reads the
//! wire or routes messages.

use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;

use serde_json::{Map, Value};

use super::error::UpstreamError;
use super::session::UpstreamSession;
pub(crate) use super::session::slot::CallEvent;
use super::session::slot::{CallSlot, Taken};
use super::transport::PostInFlight;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{Id, LazyJson, Response, Revision};
use crate::telemetry::trace::{self, CallTarget, UpstreamSpan};

/// A request in flight. Await [`Call::response`]; drain [`Call::next`]
/// meanwhile. Dropping an unfinished call cancels it upstream when the call
/// was made with [`OnDrop::CancelUpstream`].
#[must_use = "a call is cancelled or orphaned when dropped"]
pub(crate) struct Call {
    session: Arc<UpstreamSession>,
    upstream_id: u64,
    slot: Arc<CallSlot>,
    /// The response (or its failure) was handed out.
    finished: bool,
    /// What was handed out was the upstream's response (not a local failure:
    /// a cancellation, a closed session, a timeout).
    answered: bool,
    on_drop: OnDrop,
    /// Why the call is being given up, for the upstream's `notifications/cancelled`.
    cancel_reason: Option<String>,
    /// Its trace span, when the request it serves is traced; ends with the call.
    /// Boxed: an untraced call (the common case) stays small.
    span: Option<Box<UpstreamSpan>>,
    /// Toward a Streamable HTTP endpoint, the request's POST, driven while the
    /// call is waited on: a call needs no task of its own. Left unfinished at
    /// the drop, it is cancelled with the call, or left to finish on its own.
    /// (In a `Mutex` only to make the call `Sync`: it is reached through
    /// `&mut self` with `get_mut`, never locked.)
    post: Option<Mutex<PostInFlight>>,
}

/// What dropping an unfinished call means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnDrop {
    /// 2026-07-28 semantics: a closed stream is cancellation.
    CancelUpstream,
    /// Legacy semantics: a disconnect is not cancellation; let the request finish.
    Detach,
}

/// One step of a call in flight.
#[derive(Debug)]
pub(crate) enum CallStep {
    /// Something arrived for the request.
    Event(CallEvent),
    /// The request ended.
    Done(Result<Response, UpstreamError>),
}

impl UpstreamSession {
    /// Sends a request with a fresh upstream id.
    pub(crate) async fn call(
        self: &Arc<Self>,
        method: &str,
        params: Option<LazyJson>,
        original_id: Id,
        on_drop: OnDrop,
    ) -> Result<Call, UpstreamError> {
        self.call_with_headers(method, params, original_id, on_drop, &[]).await
    }

    /// Sends a request with a fresh upstream id and extra transport headers
    /// (`Mcp-Param-*` forwarded from a modern client).
    pub(crate) async fn call_with_headers(
        self: &Arc<Self>,
        method: &str,
        params: Option<LazyJson>,
        original_id: Id,
        on_drop: OnDrop,
        extra_headers: &[(String, String)],
    ) -> Result<Call, UpstreamError> {
        let span = trace::upstream_call(method, || self.call_target()).map(Box::new);
        let (params, traced_headers) = match &span {
            Some(span) => self.carry_trace(params, extra_headers, span.traceparent()),
            None => (params, None),
        };
        let (upstream_id, slot, message) = self.open_call(method, params, original_id)?;
        // The call exists before the send: dropping it mid-send cancels as usual.
        let mut call = Call {
            session: self.clone(),
            upstream_id,
            slot,
            finished: false,
            answered: false,
            on_drop,
            cancel_reason: None,
            span,
            post: None,
        };
        let headers = traced_headers.as_deref().unwrap_or(extra_headers);
        call.post = self.send_call(upstream_id, message, headers).await?.map(Mutex::new);
        Ok(call)
    }

    /// Where calls on this session go, for their spans.
    fn call_target(&self) -> CallTarget<'_> {
        CallTarget {
            upstream: self.upstream_name(),
            member: self.member_label(),
            session: self.session_kind(),
            revision: self.revision().map(Revision::as_str),
        }
    }

    /// The call's trace context as the upstream's era expects it: the
    /// `traceparent` header toward HTTP, and `_meta.traceparent` toward a
    /// 2026-07-28 upstream (replacing the client's, whose child this call is).
    fn carry_trace(
        &self,
        mut params: Option<LazyJson>,
        extra_headers: &[(String, String)],
        traceparent: &str,
    ) -> (Option<LazyJson>, Option<Vec<(String, String)>>) {
        if self.revision() == Some(Revision::V2026_07_28)
            && params.as_ref().and_then(|p| p.meta()).is_some_and(Value::is_object)
            && let Some(meta) = params
                .as_deref_mut()
                .and_then(Value::as_object_mut)
                .and_then(|p| p.get_mut("_meta"))
                .and_then(Value::as_object_mut)
        {
            meta.insert("traceparent".into(), Value::from(traceparent));
        }
        let headers = self.is_http().then(|| {
            let mut headers: Vec<(String, String)> = extra_headers
                .iter()
                .filter(|(name, _)| !name.eq_ignore_ascii_case("traceparent"))
                .cloned()
                .collect();
            headers.push(("traceparent".into(), traceparent.to_owned()));
            headers
        });
        (params, headers)
    }
}

impl Call {
    /// The upstream's answer, with the caller's id restored.
    /// Events meanwhile are dropped.
    pub(crate) async fn response(mut self) -> Result<Response, UpstreamError> {
        match self.step(true).await {
            CallStep::Done(result) => result,
            CallStep::Event(_) => Err(self.session.closed_error("response already taken")),
        }
    }

    /// The next event, or the response once it is here. The session always
    /// settles a pending call, so this never waits past the call's end.
    /// Cancel-safe: nothing is taken from the call until this returns.
    pub(crate) async fn next(&mut self) -> CallStep {
        self.step(false).await
    }

    /// Gives up on the request: it is failed locally and the upstream gets
    /// `notifications/cancelled`, whatever the call's drop policy.
    pub(crate) fn cancel(mut self, reason: &str) {
        self.on_drop = OnDrop::CancelUpstream;
        self.cancel_reason = Some(reason.to_owned());
        tracing::debug!(upstream = %self.session.upstream_name(), upstream_id = self.upstream_id, reason, "cancelling upstream request");
    }

    /// Gives up on a request the upstream did not answer in time: cancelled as
    /// above, and counted against the member's health (a slow member is unwell;
    /// a client that never answers `input_required` is not the member's fault).
    pub(crate) fn time_out(self) {
        self.session.record_member_failure("request timed out");
        self.cancel("request timed out");
    }

    /// The session this call runs on (to answer server→client requests).
    pub(crate) fn session(&self) -> &Arc<UpstreamSession> {
        &self.session
    }

    /// The id the upstream knows this request by.
    pub(crate) fn upstream_id(&self) -> u64 {
        self.upstream_id
    }

    async fn step(&mut self, skip_events: bool) -> CallStep {
        if self.finished {
            return CallStep::Done(Err(self.session.closed_error("response already taken")));
        }
        loop {
            match self.slot.take(skip_events) {
                Some(Taken::Event(event)) => return CallStep::Event(event),
                Some(Taken::Done(result)) => {
                    self.finished = true;
                    self.answered = result.is_ok();
                    if let Some(span) = &self.span {
                        span.finish(matches!(&result, Ok(r) if matches!(r.outcome, Outcome::Result(_))));
                    }
                    return CallStep::Done(result);
                }
                Some(Taken::Abandoned) => {
                    self.finished = true;
                    return CallStep::Done(Err(self.session.closed_error("session dropped")));
                }
                None => match self
                    .post
                    .as_mut()
                    .map(|post| post.get_mut().unwrap_or_else(PoisonError::into_inner))
                {
                    // The POST is read here, in the caller's task, until what it routes wakes the slot.
                    // No wait is kept while it is read: what the read routes is found by the wait
                    // made after it, where a kept one would wake this very task to poll it once more.
                    Some(post) => {
                        let mut woken = std::pin::pin!(None);
                        let posted = std::future::poll_fn(|cx| {
                            woken.set(None);
                            if post.as_mut().poll(cx).is_ready() {
                                return Poll::Ready(true);
                            }
                            woken.set(Some(self.slot.woken()));
                            match woken.as_mut().as_pin_mut() {
                                Some(wait) => wait.poll(cx).map(|()| false),
                                None => Poll::Ready(false), // (never: just set) look again
                            }
                        })
                        .await;
                        if posted {
                            self.post = None;
                        }
                    }
                    None => self.slot.woken().await,
                },
            }
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.slot.detach();
        let post = self
            .post
            .take()
            .map(|post| post.into_inner().unwrap_or_else(PoisonError::into_inner));
        let pending = !self.finished && self.session.is_pending(self.upstream_id);
        if let Some(post) = post
            && (self.answered || (pending && self.on_drop == OnDrop::Detach))
        {
            // Read on to its end: the rest of an answered stream (its connection
            // is then reused), or a legacy request left to finish. Any other
            // POST is dropped: its stream closed is the request given up (for a
            // 2026-07-28 upstream the whole cancellation: `cancel_on_link`).
            self.session.adopt_post(self.upstream_id, post);
        }
        if !pending || self.on_drop == OnDrop::Detach {
            return;
        }
        self.session
            .fail(self.upstream_id, self.session.closed_error("cancelled"));
        let session = self.session.clone();
        let upstream_id = self.upstream_id;
        let mut params = Map::new();
        params.insert("requestId".into(), Value::from(upstream_id));
        let reason = self
            .cancel_reason
            .take()
            .unwrap_or_else(|| "client closed the request".to_owned());
        params.insert("reason".into(), Value::from(reason));
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if session.cancel_on_link(upstream_id) {
                    return; // the closed stream is the cancellation
                }
                let _ = session
                    .notify("notifications/cancelled", Some(Value::Object(params).into()))
                    .await;
            });
        }
    }
}
