//! The 2024-11-05 HTTP+SSE transport for clients that only speak it: `GET
//! <path>/sse` opens a stream whose first event names the POST endpoint;
//! every answer, notification and relayed request travels on that stream.
//!
//! The stream is the connection: its client session ends when it closes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use dashmap::DashMap;
use rand::Rng;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::respond;
use crate::auth::Principal;
use crate::bridge::{ClientSession, Reply, SessionLookup, reply};
use crate::protocol::Message;
use crate::protocol::sse::{KEEP_ALIVE, event_frame};
use crate::router::Backend;

/// Messages queued toward one SSE client before producers wait.
const OUT_QUEUE: usize = 256;

/// Open HTTP+SSE connections by the id in their endpoint URL.
#[derive(Default)]
pub struct SseConnections {
    connections: DashMap<String, Arc<SseConnection>>,
}

/// One client's stream.
pub struct SseConnection {
    backend: Backend,
    /// Who opened the stream: only they may post to it.
    principal: Principal,
    out: mpsc::Sender<Message>,
    /// Set by `initialize`; a std mutex, never held across `.await`.
    session: Mutex<Option<Arc<ClientSession>>>,
}

impl SseConnections {
    /// Opens a stream for `upstream`; its endpoint event points at `messages_path`.
    pub fn open(
        self: &Arc<Self>,
        backend: Backend,
        principal: Principal,
        messages_path: &str,
        keep_alive: Duration,
        closing: CancellationToken,
    ) -> http::Response<respond::Body> {
        let id = format!("{:032x}", rand::rng().random::<u128>());
        let (out, mut messages) = mpsc::channel(OUT_QUEUE);
        let connection = Arc::new(SseConnection {
            backend,
            principal,
            out,
            session: Mutex::new(None),
        });
        self.connections.insert(id.clone(), connection);
        let (tx, response) = respond::sse();
        let endpoint = format!("{messages_path}?session_id={id}");
        let connections = self.clone();
        tokio::spawn(async move {
            let _ = tx.send(Bytes::from(event_frame("endpoint", &endpoint))).await;
            let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive);
            loop {
                tokio::select! {
                    message = messages.recv() => match message {
                        Some(message) => if tx.send(respond::sse_frame(&message)).await.is_err() { break },
                        None => break,
                    },
                    _ = ticker.tick() => if tx.send(Bytes::from_static(KEEP_ALIVE)).await.is_err() { break },
                    () = tx.closed() => break,
                    () = closing.cancelled() => break,
                }
            }
            connections.close(&id);
        });
        response
    }

    /// The open connection `id`, when it is `principal`'s: only who opened a
    /// stream may post to it.
    pub fn find(&self, id: &str, principal: &Principal) -> Option<Arc<SseConnection>> {
        self.connections
            .get(id)
            .map(|c| c.clone())
            .filter(|c| c.principal == *principal)
    }

    fn close(&self, id: &str) {
        if let Some((_, connection)) = self.connections.remove(id)
            && let Some(session) = connection.session()
        {
            session.end();
        }
    }

    /// Ends every connection's session (shutdown).
    pub fn close_all(&self) {
        let ids: Vec<String> = self.connections.iter().map(|c| c.key().clone()).collect();
        for id in ids {
            self.close(&id);
        }
    }
}

impl SseConnection {
    /// The backend the stream was opened for.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The client session `initialize` opened on this stream, if any.
    pub fn lookup(&self) -> SessionLookup {
        match self.session() {
            Some(session) => SessionLookup::Found(session),
            None => SessionLookup::Absent,
        }
    }

    /// Sends `reply` down the stream; a fresh session becomes the stream's.
    pub fn deliver(&self, reply: Reply) {
        if let Reply::Initialized(_, session) = &reply {
            self.adopt(session.clone());
        }
        let _ = reply::forward_to(reply, self.out.clone());
    }

    fn session(&self) -> Option<Arc<ClientSession>> {
        self.session.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn adopt(&self, session: Arc<ClientSession>) {
        let previous = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(session.clone());
        if let Some(previous) = previous {
            previous.end();
        }
        reply::forward_unsolicited(&session, self.out.clone());
    }
}
