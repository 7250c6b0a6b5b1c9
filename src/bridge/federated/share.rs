//! One member's share of a joined listen: its notifications reach the joined
//! stream with their names exposed, and when the member ends its share (a
//! restarted stdio child, a dropped connection, a member that closed it) while
//! the client still listens, the share is opened again once the member can be
//! reached. The spec has a listen's client re-open it after a restart; toward
//! the members eragate is that client, and the joined listen's own client
//! never learns that one member went away and came back.

use std::sync::{Arc, Weak};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{expose_notification, list_changed_method};
use crate::auth::Principal;
use crate::bridge::listen::ReopenPause;
use crate::bridge::reply::Responses;
use crate::gateway::Gateway;
use crate::protocol::envelope::Envelope;
use crate::protocol::{Id, Message};
use crate::router::federation::Federation;

/// What a share needs to be opened again without the request that joined it.
pub(super) struct Share {
    pub gateway: Weak<Gateway>,
    /// The gateway's shutdown: a share ended by it is not opened again.
    pub closing: CancellationToken,
    pub federation: Arc<Federation>,
    pub member: usize,
    /// The member's prefix, by which its names are exposed.
    pub prefix: String,
    /// The joined listen's id: the member's listen is asked under it too.
    pub id: Id,
    /// The member's share of the filter.
    pub params: Value,
    pub envelope: Envelope,
    pub principal: Principal,
}

/// Whether an ended share could be opened again.
enum Reopened {
    Open(Box<Responses>),
    /// Not now (the member could not be reached, or did not acknowledge).
    NotYet,
    /// Never: the gateway is shutting down, or the federation is no longer routed.
    Never,
}

// === impl Share ===

impl Share {
    /// Forwards the member's notifications into `joined` until the client
    /// closes its listen, opening the share again whenever the member ends it.
    pub async fn run(self, mut responses: Responses, joined: mpsc::Sender<Message>) {
        let mut pause = ReopenPause::default();
        loop {
            while let Some(message) = responses.recv_for(&joined).await {
                let Message::Notification(mut notification) = message else {
                    break; // the member ended its share with the listen's result
                };
                if notification.method.ends_with("/list_changed") {
                    self.federation.list_changed(list_changed_method(&notification.method));
                }
                expose_notification(&self.prefix, &mut notification);
                if joined.send(Message::Notification(notification)).await.is_err() {
                    return; // the client closed its listen: dropping ours closes the member's
                }
                pause.reset();
            }
            drop(responses);
            responses = loop {
                tokio::select! {
                    () = joined.closed() => return,
                    () = self.closing.cancelled() => return,
                    () = tokio::time::sleep(pause.take()) => {}
                }
                match self.reopen().await {
                    Reopened::Open(responses) => break *responses,
                    Reopened::NotYet => {}
                    Reopened::Never => return,
                }
            };
        }
    }

    /// Asks the member for its share again, as the joined listen first did.
    async fn reopen(&self) -> Reopened {
        let member = self.federation.members().get(self.member).map_or("", |m| m.pool.name());
        let reply = super::listen_unprompted(
            &self.gateway,
            &self.federation,
            self.member,
            self.id.clone(),
            self.params.clone(),
            &self.envelope,
            &self.principal,
        )
        .await;
        let Some(reply) = reply else {
            return Reopened::Never;
        };
        let within = self.federation.config().handshake_timeout.0;
        match super::acknowledged(reply, within).await {
            Ok((_, responses)) => {
                tracing::info!(member, "a member's ended listen share was opened again");
                Reopened::Open(Box::new(responses))
            }
            Err(why) => {
                tracing::debug!(
                    member,
                    why,
                    "a member's ended listen share could not be opened again yet"
                );
                Reopened::NotYet
            }
        }
    }
}
