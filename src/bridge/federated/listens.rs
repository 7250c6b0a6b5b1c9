//! Listens on a federated path: one `subscriptions/listen` joined across the
//! members, each member's listen opened with its own share of the filter,
//! one acknowledgement of what any honours, then every member's
//! notifications with their names exposed; a member's share ended while the
//! client listens is opened again ([`Share`]). Also the listens eragate asks
//! for itself outside any client's request (its watch of the members, a share
//! opened again).

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Asking, error_reply, expose_notification};
use crate::auth::Principal;
use crate::bridge::listen::ReopenPause;
use crate::bridge::modern::ListenCounting;
use crate::bridge::param_headers::SentParams;
use crate::bridge::reply::{Reply, Responses};
use crate::gateway::Gateway;
use crate::protocol::envelope::Envelope;
use crate::protocol::{Era, ErrorObject, Id, Message, ModernMethod, Notification, Request};
use crate::router::Backend;
use crate::router::federation::{Federation, Member};
use crate::translate::listen::{self, Filter};

/// Bound of the messages queued on a joined listen.
const FEDERATED_QUEUE: usize = 64;

impl Asking<'_> {
    /// opened with its own share of the filter; one acknowledgement of what
    /// any honours; then every member's notifications, URIs exposed.
    pub(super) async fn listen(&self, request: Request) -> Reply {
        let wanted = request
            .params
            .as_ref()
            .and_then(|p| p.get("notifications"))
            .cloned()
            .unwrap_or(json!({}));
        self.joined_listen(request.id, &wanted, |_| true, ListenCounting::Counted)
            .await
    }

    /// A listen `id` with the filter `wanted` joined across the members
    /// `joins` picks (by index): each one's listen opened with its own share
    /// of the filter; one acknowledgement of what any honours; then their
    /// notifications, URIs exposed. An error when none could open one.
    pub(super) async fn joined_listen(
        &self,
        id: Id,
        wanted: &Value,
        joins: impl Fn(usize) -> bool,
        counting: ListenCounting,
    ) -> Reply {
        // One place in the principal's listen quota, however many members it joins.
        let hold = match counting {
            ListenCounting::Counted => match self.gateway.listens().hold(self.principal.as_str()) {
                Ok(hold) => Some(hold),
                Err(refusal) => return Reply::rejected(Some(id), refusal),
            },
            ListenCounting::CountedElsewhere => None,
        };
        let joined: Vec<(usize, &Member, &str)> = self
            .federation
            .members()
            .iter()
            .zip(self.prefixes())
            .enumerate()
            .filter(|(index, _)| joins(*index))
            .map(|(index, (member, prefix))| (index, member, *prefix))
            .collect();
        // Each member's listen opened and acknowledged together (a listen's
        // request is sent as its answer is first waited for).
        let within = self.federation.config().handshake_timeout.0;
        let asked_id = &id;
        let opened = join_all(joined.iter().map(|(index, member, _)| async move {
            let params = json!({ "notifications": member_filter(wanted, self.prefixes(), *index) });
            let reply = self
                .ask(
                    *index,
                    asked_id.clone(),
                    ModernMethod::SubscriptionsListen,
                    Some(params.clone()),
                )
                .await;
            match acknowledged(reply, within).await {
                Ok((ack, responses)) => Some((ack, responses, params)),
                Err(why) => {
                    tracing::warn!(member = %member.pool.name(), "a member's listen {why}");
                    None
                }
            }
        }))
        .await;
        let mut filter = Filter {
            tools: false,
            prompts: false,
            resources: false,
            uris: Vec::new(),
        };
        let mut shares = Vec::new();
        for ((index, _, prefix), opened) in joined.iter().zip(opened) {
            if let Some((ack, responses, params)) = opened {
                join_acknowledgement(&mut filter, ack.params.as_deref(), prefix);
                let share = Share {
                    gateway: self.gateway.weak(),
                    closing: self.gateway.closing().clone(),
                    federation: self.federation.clone(),
                    member: *index,
                    prefix: (*prefix).to_owned(),
                    id: id.clone(),
                    params,
                    envelope: self.envelope.clone(),
                    principal: self.principal.clone(),
                };
                shares.push((share, responses));
            }
        }
        if shares.is_empty() {
            let error = ErrorObject::internal("no member of this federation could open a listen");
            return error_reply(id, error);
        }
        let (tx, rx) = mpsc::channel(FEDERATED_QUEUE);
        let _ = tx.try_send(listen::acknowledgement(&filter, &id.to_value()));
        for (share, responses) in shares {
            tokio::spawn(share.run(responses, tx.clone()));
        }
        let responses = match hold {
            Some(hold) => Responses::from(rx).holding(hold),
            None => rx.into(),
        };
        Reply::Stream(responses, Era::Modern)
    }
}

/// A listen's `notifications` filter as member `member` gets it: the list
/// changes as asked, and only its own resources (URIs restored).
fn member_filter(wanted: &Value, prefixes: &[&str], member: usize) -> Value {
    let mut filter = wanted.as_object().cloned().unwrap_or_default();
    let uris: Vec<Value> = filter
        .get("resourceSubscriptions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(|uri| crate::federate::names::restore_uri(prefixes, uri))
        .filter(|(owner, _)| *owner == member)
        .map(|(_, uri)| Value::from(uri))
        .collect();
    if filter.contains_key("resourceSubscriptions") {
        filter.insert("resourceSubscriptions".into(), Value::Array(uris));
    }
    Value::Object(filter)
}

/// Adds what one member's acknowledgement honours to `filter`.
fn join_acknowledgement(filter: &mut Filter, params: Option<&Value>, prefix: &str) {
    let Some(honoured) = params.and_then(|p| p.get("notifications")) else {
        return;
    };
    let flag = |key: &str| honoured.get(key).and_then(Value::as_bool) == Some(true);
    filter.tools |= flag("toolsListChanged");
    filter.prompts |= flag("promptsListChanged");
    filter.resources |= flag("resourcesListChanged");
    let uris = honoured.get("resourceSubscriptions").and_then(Value::as_array);
    filter.uris.extend(
        uris.into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|uri| crate::federate::names::rewrite_uri(prefix, uri)),
    );
}

/// The `'static` name of a list-change notification (the federation's channel carries those).
pub(super) fn list_changed_method(method: &str) -> &'static str {
    match method {
        "notifications/tools/list_changed" => "notifications/tools/list_changed",
        "notifications/prompts/list_changed" => "notifications/prompts/list_changed",
        _ => "notifications/resources/list_changed",
    }
}

/// A member's answer to a listen, once its first message acknowledged it
/// within `within`: the acknowledgement and the stream that follows it. `Err`
/// says what went wrong instead ("did not open", "was not acknowledged").
async fn acknowledged(reply: Reply, within: Duration) -> Result<(Notification, Responses), &'static str> {
    let Reply::Stream(mut responses, _) = reply else {
        return Err("did not open");
    };
    match tokio::time::timeout(within, responses.recv()).await.ok().flatten() {
        Some(Message::Notification(ack)) if ack.method == "notifications/subscriptions/acknowledged" => {
            Ok((ack, responses))
        }
        _ => Err("was not acknowledged"),
    }
}

/// Asks `member` of `federation` for a listen outside any client's request
/// (eragate's own watch of a member, a joined listen's share opened again);
/// `None` once that should stop: the gateway is gone or closing, or
/// `federation` is no longer the one routed at its path (a reload replaced it).
pub(super) async fn listen_unprompted(
    gateway: &std::sync::Weak<Gateway>,
    federation: &Arc<Federation>,
    member: usize,
    id: Id,
    params: Value,
    envelope: &Envelope,
    principal: &Principal,
) -> Option<Reply> {
    let gateway = gateway.upgrade()?;
    let routed = gateway.router().route(&federation.config().path);
    let still_ours = routed
        .as_ref()
        .and_then(Backend::federation)
        .is_some_and(|routed| Arc::ptr_eq(routed, federation));
    if gateway.closing().is_cancelled() || !still_ours {
        return None;
    }
    let asking = Asking {
        gateway: &gateway,
        federation,
        prefixes: federation.prefixes(),
        envelope,
        client: None,
        principal,
        session: None,
        sent: SentParams::NoHeaders,
    };
    Some(
        asking
            .ask(member, id, ModernMethod::SubscriptionsListen, Some(params))
            .await,
    )
}

/// One member's share of a joined listen, and what it needs to be opened
/// again without the request that joined it. Its notifications reach the
/// joined stream with their names exposed; when the member ends its share (a
/// restarted stdio child, a dropped connection, a member that closed it) while
/// the client still listens, the share is opened again once the member can be
/// reached. The spec has a listen's client re-open it after a restart; toward
/// the members eragate is that client, and the joined listen's own client
/// never learns that one member went away and came back.
struct Share {
    gateway: Weak<Gateway>,
    /// The gateway's shutdown: a share ended by it is not opened again.
    closing: CancellationToken,
    federation: Arc<Federation>,
    member: usize,
    /// The member's prefix, by which its names are exposed.
    prefix: String,
    /// The joined listen's id: the member's listen is asked under it too.
    id: Id,
    /// The member's share of the filter.
    params: Value,
    envelope: Envelope,
    principal: Principal,
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
    pub(crate) async fn run(self, mut responses: Responses, joined: mpsc::Sender<Message>) {
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
        let reply = listen_unprompted(
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
        match acknowledged(reply, within).await {
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
