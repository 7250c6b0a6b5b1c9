//! `subscriptions/listen` bridged both ways: a 2026-07-28 client's listen on a
//! legacy upstream's session (its notification stream plus `resources/subscribe`),
//! and a legacy client's `resources/subscribe` kept as one listen on a modern upstream.
//! Open listens are bounded per principal and in all ([`ListenQuota`], a [`super::quota::HeldQuota`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::reply::Reply;
use super::sessions::ClientSession;
use crate::gateway::Gateway;
use crate::protocol::{ErrorObject, Id, LazyJson, Message, Request};
use crate::router::{CallEvent, CallStep, OnDrop, UpstreamSession};
use crate::translate::down;
use crate::translate::listen::{self, Filter};

/// Bound of notifications queued toward one listen stream.
const LISTEN_QUEUE: usize = 64;

/// One open listen's place in the quota, given back when dropped.
pub(crate) type ListenHold = crate::policy::held::Hold;

/// A modern client's listen on a legacy upstream session: acknowledge what the
/// upstream can honour, subscribe to the requested resources (shared with other
/// listens on the session), relay matching notifications tagged with the
/// listen's id, and unsubscribe when the listen ends.
pub(crate) async fn on_legacy_upstream(
    gateway: &Gateway,
    session: Arc<UpstreamSession>,
    request: Request,
    hold: Option<ListenHold>,
) -> Reply {
    let capabilities = session
        .initialize_result()
        .and_then(|r| r.get("capabilities").cloned())
        .unwrap_or_default();
    let wanted = request
        .params
        .as_ref()
        .and_then(|p| p.get("notifications"))
        .cloned()
        .unwrap_or(json!({}));
    let mut filter = Filter::honoured(&wanted, &capabilities);
    // Subscribe before acknowledging, so the acknowledgement is the truth.
    let mut held = Vec::new();
    for uri in &filter.uris {
        if !session.hold_subscription(uri) || subscribe(&session, "resources/subscribe", uri).await {
            held.push(uri.clone());
        } else {
            session.release_subscription(uri);
        }
    }
    filter.uris = held;
    let listen_id = request.id.to_value();
    let (tx, rx) = mpsc::channel(LISTEN_QUEUE);
    let _ = tx.try_send(listen::acknowledgement(&filter, &listen_id));
    let mut unsolicited = session.subscribe();
    let closing = gateway.closing().clone();
    tokio::spawn(async move {
        let _hold = hold;
        loop {
            tokio::select! {
                message = unsolicited.recv() => match message {
                    Ok(Message::Notification(n)) if filter.wants(&n) => {
                        if tx.send(listen::tagged(&n.method, n.params.map(LazyJson::into_value), &listen_id)).await.is_err() { break; }
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => {
                        // The upstream session ended: close the listen gracefully.
                        let _ = tx.send(listen::listen_result(&request.id)).await;
                        return;
                    }
                },
                () = tx.closed() => break,
                () = closing.cancelled() => {
                    let _ = tx.send(listen::listen_result(&request.id)).await;
                    break;
                }
            }
        }
        for uri in &filter.uris {
            if session.release_subscription(uri) {
                subscribe(&session, "resources/unsubscribe", uri).await;
            }
        }
    });
    Reply::Stream(rx.into(), crate::protocol::Era::Modern)
}

/// Sends `resources/subscribe` or `resources/unsubscribe`; `true` on success.
async fn subscribe(session: &Arc<UpstreamSession>, method: &str, uri: &str) -> bool {
    let Ok(call) = session
        .call(method, Some(json!({"uri": uri}).into()), Id::number(0), OnDrop::Detach)
        .await
    else {
        return false;
    };
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(10), call.response()).await,
        Ok(Ok(crate::protocol::Response {
            outcome: crate::protocol::jsonrpc::Outcome::Result(_),
            ..
        }))
    )
}

/// A legacy client's `resources/subscribe` or `resources/unsubscribe` toward a
/// modern upstream: the session's set changes and its one listen is reopened
/// with the new set (a listen's filter is fixed); refused past the session's bound.
pub(crate) async fn legacy_subscription_change(
    session: &Arc<ClientSession>,
    request: &Request,
) -> Result<Value, ErrorObject> {
    let Some(uri) = request.param_str("uri") else {
        return Ok(json!({}));
    };
    let subscribe = request.method == "resources/subscribe";
    let set = session
        .change_subscriptions(uri, subscribe)
        .map_err(|full| full.error())?;
    reopen(session, set);
    Ok(json!({}))
}

/// The pause before a listen eragate keeps open for someone is asked for again
/// after its upstream ended it (a restart, a dropped connection): 1 s, doubling
/// up to a minute while the upstream cannot be reached, 1 s again once it delivers.
/// One policy for every such listen (a legacy session's here, a federated
/// listen's member share, the federation's own watch).
pub(crate) struct ReopenPause(Duration);

impl Default for ReopenPause {
    fn default() -> ReopenPause {
        ReopenPause(ReopenPause::FIRST)
    }
}

impl ReopenPause {
    const FIRST: Duration = Duration::from_secs(1);
    const LONGEST: Duration = Duration::from_secs(60);

    /// The listen delivered: the next pause is the first again.
    pub(crate) fn reset(&mut self) {
        self.0 = ReopenPause::FIRST;
    }

    /// The pause to wait now; the one after it is twice as long.
    pub(crate) fn take(&mut self) -> Duration {
        let now = self.0;
        self.0 = (now * 2).min(ReopenPause::LONGEST);
        now
    }
}

/// (Re)opens the session's listen on the modern upstream for `uris`; notifications
/// go to the client's stream without their subscription tag. When the upstream
/// ends it (the spec has a listen's client re-open it after a restart; the
/// legacy client cannot know it should), it is opened again after a pause, until
/// the session ends or changes its set (either stops this task).
fn reopen(session: &Arc<ClientSession>, uris: BTreeSet<String>) {
    if uris.is_empty() {
        session.replace_listen(None);
        return;
    }
    let Some(envelope) = session.envelope() else { return };
    let params = json!({"notifications": {
        "toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true,
        "resourceSubscriptions": uris.iter().collect::<Vec<_>>(),
    }});
    let params = down::legacy_params_for_modern(Some(params), &envelope);
    let client = Arc::downgrade(session);
    let task = tokio::spawn(async move {
        let mut pause = ReopenPause::default();
        loop {
            let Some(backend) = client.upgrade().and_then(|c| c.upstream().cloned()) else {
                return;
            };
            let call = backend
                .call(
                    "subscriptions/listen",
                    Some(params.clone().into()),
                    Id::number(0),
                    OnDrop::CancelUpstream,
                )
                .await;
            if let Ok(mut call) = call {
                loop {
                    match call.next().await {
                        CallStep::Event(CallEvent::Notification(n))
                            if n.method != "notifications/subscriptions/acknowledged" =>
                        {
                            let Some(client) = client.upgrade() else { return };
                            client.push(Message::Notification(listen::untagged(n)));
                            pause.reset();
                        }
                        CallStep::Event(_) => {}
                        CallStep::Done(_) => break,
                    }
                }
            }
            let wait = pause.take();
            tracing::debug!(
                ?wait,
                "a legacy session's listen on its modern upstream ended; opening it again"
            );
            tokio::time::sleep(wait).await;
        }
    });
    session.replace_listen(Some(task.abort_handle()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reopen_pause_doubles_up_to_a_minute_and_starts_again_once_delivered() {
        let mut pause = ReopenPause::default();
        let seconds: Vec<u64> = (0..9).map(|_| pause.take().as_secs()).collect();
        assert_eq!(seconds, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        pause.reset();
        assert_eq!(pause.take(), Duration::from_secs(1));
    }
}
