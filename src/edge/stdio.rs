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
use crate::bridge::{Batches, ClientSession, Intake, Reply, SessionLookup, Taken, reply, take};
use crate::gateway::Gateway;
use crate::protocol::jsonrpc::FrameError;
use crate::protocol::{Id, Message};
use crate::router::Backend;
use crate::translate::RoutingHeaders;

/// Bound of lines queued toward stdout.
const OUT_QUEUE: usize = 256;

/// Serves one client on `input`/`output` until `input` ends.
pub(crate) async fn serve<R, W>(gateway: Arc<Gateway>, backend: Backend, input: R, output: W)
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
    let max_line = connection.gateway.edge().listen().max_body_bytes;
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
        let caller = Admitted::anonymous();
        let intake = Intake {
            backend: &self.backend,
            caller: &caller,
            session: self.lookup(),
            routing: RoutingHeaders::None,
            forwarded: &[],
            traceparent: None,
            batches: Batches::OfTheSession,
        };
        match take(&self.gateway, line, intake).await {
            Taken::One(_, Reply::Cancelled(id)) => self.cancel(&id),
            Taken::One(id, reply) => {
                if let Reply::Initialized(_, session) = &reply {
                    self.adopt(session.clone());
                }
                self.deliver(reply, id);
            }
            Taken::Batch(replies) => {
                // The answer is one array line, written once every member is answered.
                let lines = self.lines.clone();
                tokio::spawn(async move {
                    let responses = reply::batch_responses(replies).await;
                    if !responses.is_empty() {
                        let _ = lines.send(Message::array_to_bytes(&responses)).await;
                    }
                });
            }
            Taken::Refused(id, rejection) => {
                let _ = self.out.send(reply::rejection_message(id, &rejection)).await;
            }
        }
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
    fn cancel(&self, id: &Id) {
        for handle in lock(&self.in_flight).remove(id).unwrap_or_default() {
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
