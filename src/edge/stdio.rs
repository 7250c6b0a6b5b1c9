//! eragate as a stdio server: a local client of either era speaks newline-
//! delimited JSON-RPC on stdin/stdout, and eragate serves it from any upstream.
//!
//! The connection is the session: a legacy client's `initialize` opens one
//! client session for the life of the process, and whatever its upstream
//! session sends outside a request is written inline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio_util::codec::{FramedRead, LinesCodec};

use crate::auth::Admitted;
use crate::bridge::{ClientSession, Gateway, Inbound, Reply, SessionLookup, dispatch, reply};
use crate::protocol::jsonrpc::{Frame, FrameError};
use crate::protocol::scan::{self, Bounds};
use crate::protocol::{Id, Message};
use crate::router::Backend;
use crate::translate::{Classification, RoutingHeaders, classify};

/// Bound of lines queued toward stdout.
const OUT_QUEUE: usize = 256;

/// Serves one client on `input`/`output` until `input` ends.
pub async fn serve<R, W>(gateway: Arc<Gateway>, backend: Backend, input: R, output: W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, queue) = mpsc::channel::<Message>(OUT_QUEUE);
    let (lines, raw) = mpsc::channel::<Vec<u8>>(OUT_QUEUE);
    let writer = tokio::spawn(write_lines(output, queue, raw));
    let mut connection = Connection {
        gateway,
        backend,
        out,
        lines,
        session: None,
        in_flight: Arc::default(),
    };
    let max_line = connection.gateway.config.listen.max_body_bytes;
    let mut lines = FramedRead::new(input, LinesCodec::new_with_max_length(max_line));
    while let Some(line) = lines.next().await {
        match line {
            Ok(line) if line.trim().is_empty() => {}
            Ok(line) => connection.handle_line(line.as_bytes()).await,
            Err(error) => {
                tracing::warn!(error = %error, "unreadable input line; skipped");
                let response = FrameError::Invalid {
                    id: None,
                    reason: "line too long or not UTF-8",
                }
                .to_response();
                let _ = connection.out.send(response.into_message()).await;
            }
        }
    }
    if let Some(session) = connection.session.take() {
        session.end();
    }
    drop(connection);
    let _ = writer.await;
}

struct Connection {
    gateway: Arc<Gateway>,
    backend: Backend,
    out: mpsc::Sender<Message>,
    /// Raw lines (batch answers, which are arrays rather than messages).
    lines: mpsc::Sender<Vec<u8>>,
    session: Option<Arc<ClientSession>>,
    /// Modern requests in flight by client id, so `notifications/cancelled` can stop them.
    /// An id may be in flight more than once (a client reusing it): each is answered,
    /// and a cancellation naming it stops them all.
    in_flight: Arc<Mutex<HashMap<Id, Vec<AbortHandle>>>>,
}

impl Connection {
    async fn handle_line(&mut self, line: &[u8]) {
        let bounds = {
            let limits = &self.gateway.limits().limits;
            Bounds {
                values: Some(limits.max_request_values),
                items: Some(limits.max_batch_items),
            }
        };
        let allowed = self.session.as_ref().is_some_and(|s| s.revision.allows_batches());
        if !allowed && scan::is_batch(line, bounds) {
            return self.handle_batch(Vec::new()).await;
        }
        let message = match Frame::parse_within(line, bounds) {
            Ok(Frame::Single(message)) => message,
            Ok(Frame::Batch(items)) => return self.handle_batch(items).await,
            Err(error) => {
                let _ = self.out.send(error.to_response().into_message()).await;
                return;
            }
        };
        if let Message::Notification(n) = &message
            && n.method == "notifications/cancelled"
            && classify::classify(&n.method, n.params.as_ref(), false, RoutingHeaders::None)
                == Classification::ModernNotification
        {
            self.cancel_modern(n.params.as_deref());
            return;
        }
        let is_initialize = matches!(&message, Message::Request(r) if r.method == "initialize");
        let client_id = match &message {
            Message::Request(r) => Some(r.id.clone()),
            _ => None,
        };
        let inbound = Inbound::bare(message, self.lookup());
        let reply = dispatch(&self.gateway, &self.backend, inbound, &Admitted::anonymous()).await;
        if is_initialize && let Reply::Initialized(_, session) = &reply {
            self.adopt(session.clone());
        }
        self.deliver(reply, client_id);
    }

    /// A batch (2025-03-26 sessions only): each member served, the responses written as one array line.
    async fn handle_batch(&mut self, items: Vec<Result<Message, FrameError>>) {
        let allowed = self.session.as_ref().is_some_and(|s| s.revision.allows_batches());
        if !allowed {
            let error = FrameError::Invalid {
                id: None,
                reason: "JSON-RPC batches are only allowed for 2025-03-26 sessions",
            };
            let _ = self.out.send(error.to_response().into_message()).await;
            return;
        }
        let mut replies = Vec::with_capacity(items.len());
        for item in items {
            let reply = match item {
                Ok(message) => {
                    let inbound = Inbound::bare(message, self.lookup());
                    dispatch(&self.gateway, &self.backend, inbound, &Admitted::anonymous()).await
                }
                Err(error) => Reply::Message(reply::Status::Ok, error.to_response().into_message()),
            };
            replies.push(reply);
        }
        // The answer is one array line, written once every member is answered.
        let lines = self.lines.clone();
        tokio::spawn(async move {
            let responses = reply::batch_responses(replies).await;
            if responses.is_empty() {
                return;
            }
            let _ = lines.send(Message::array_to_bytes(&responses)).await;
        });
    }

    fn lookup(&self) -> SessionLookup {
        match &self.session {
            Some(session) => SessionLookup::Found(session.clone()),
            None => SessionLookup::Absent,
        }
    }

    /// Makes a freshly initialized session the connection's, replacing any earlier one.
    fn adopt(&mut self, session: Arc<ClientSession>) {
        if let Some(previous) = self.session.replace(session.clone()) {
            previous.end();
        }
        reply::forward_unsolicited(&session, self.out.clone());
    }

    fn deliver(&self, reply: Reply, client_id: Option<Id>) {
        let Some(task) = reply::forward_to(reply, self.out.clone()) else {
            return;
        };
        let Some(id) = client_id else {
            return;
        };
        let in_flight = self.in_flight.clone();
        let handle = task.abort_handle();
        let task_id = handle.id();
        lock(&in_flight).entry(id.clone()).or_default().push(handle);
        // Forget the request once its stream is done.
        tokio::spawn(async move {
            let _ = task.await;
            let mut in_flight = lock(&in_flight);
            if let Some(handles) = in_flight.get_mut(&id) {
                handles.retain(|h| h.id() != task_id);
                if handles.is_empty() {
                    in_flight.remove(&id);
                }
            }
        });
    }

    /// A modern client's `notifications/cancelled`: dropping the stream cancels upstream.
    fn cancel_modern(&self, params: Option<&serde_json::Value>) {
        let Some(id) = params.and_then(|p| p.get("requestId")).and_then(Id::from_value) else {
            return;
        };
        for handle in lock(&self.in_flight).remove(&id).unwrap_or_default() {
            handle.abort();
        }
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut output: W,
    mut queue: mpsc::Receiver<Message>,
    mut raw: mpsc::Receiver<Vec<u8>>,
) {
    loop {
        let mut line = tokio::select! {
            message = queue.recv() => match message {
                Some(message) => message.to_bytes(),
                None => return,
            },
            Some(line) = raw.recv() => line,
        };
        line.push(b'\n');
        if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another task panicked holding it; the map is still usable.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
