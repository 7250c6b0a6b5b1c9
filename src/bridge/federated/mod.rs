//! Serving a federated path. Every client request, of either era, becomes
//! 2026-07-28 requests to the members concerned, each served by `modern` in
//! that member's own era (pooled sessions, list cache, translation and all);
//! their answers become one. The rules are [`crate::federate`]'s and the
//! federation's state is [`crate::router::federation`]'s; this module asks the
//! members and joins their answers. A member failing or slow is left out of
//! lists, never fails them.
//!
//! Here: one client request served across the members ([`Asking`]) and how
//! one member is asked. By concern: the merged handshake (`handshake`), lists
//! and the exposed names learned from them (`lists`), calls routed to their
//! owner (`calls`), listens joined across the members and each member's share
//! (`listens`); for handshake-era clients, their sessions (`legacy_clients`),
//! calls relayed as they came to a legacy member (`relay`) and
//! `resources/subscribe` (`subscriptions`); and what eragate does outside any
//! request: watching members for list changes, checking `never` for
//! collisions (`watch`).

use std::sync::Arc;

use serde_json::Value;

use super::modern::ListenCounting;
use super::param_headers::SentParams;
use super::reply::{Reply, Status};
use super::sessions::ClientSession;
use crate::auth::Principal;
use crate::federate::names::Names;
use crate::federate::route::{self, ListShape, Naming};
use crate::gateway::Gateway;
use crate::protocol::envelope::Envelope;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{
    Era, ErrorObject, Id, LazyJson, Message, ModernMethod, Notification, Request, Response, Revision,
};
use crate::router::federation::Federation;
use crate::translate::{ModernRequest, down, up};

mod calls;
mod handshake;
mod legacy_clients;
mod listens;
mod lists;
mod relay;
mod subscriptions;
mod watch;

pub(crate) use legacy_clients::serve_legacy;
pub(crate) use watch::{never_collisions, spawn_watcher, spawn_watchers};

/// The client's era, which shapes the answer.
#[derive(Clone, Copy)]
enum ClientEra {
    /// A 2026-07-28 client: members' answers as they are.
    Modern,
    /// A handshake-era client: modern-only members removed, content downgraded.
    Legacy(Revision),
}

/// Answers one 2026-07-28 request on `federation`'s path.
pub(crate) async fn serve_modern(
    gateway: &Gateway,
    federation: &Arc<Federation>,
    request: Request,
    modern: ModernRequest,
    sent: SentParams<'_>,
    principal: &Principal,
) -> Reply {
    let asking = Asking {
        gateway,
        federation,
        prefixes: federation.prefixes(),
        envelope: &modern.envelope,
        client: Some(&modern),
        principal,
        session: None,
        sent,
    };
    asking.serve(request, modern.method, ClientEra::Modern).await
}

/// One client request being served across the members.
struct Asking<'a> {
    gateway: &'a Gateway,
    federation: &'a Arc<Federation>,
    /// Each member's prefix, by index.
    prefixes: Vec<&'a str>,
    /// The envelope every member request carries (the client's own for a modern client).
    envelope: &'a Envelope,
    /// A 2026-07-28 client's own request: what is routed to one member in the
    /// client's method is asked with it (its envelope not copied per request).
    client: Option<&'a ModernRequest>,
    principal: &'a Principal,
    /// A legacy client's session: its calls to legacy members are relayed on member sessions.
    session: Option<&'a Arc<ClientSession>>,
    /// A 2026-07-28 client's `Mcp-Param-*` headers, for the member its own
    /// request is routed to: checked there or forwarded, by the member's era.
    sent: SentParams<'a>,
}

// === impl Asking ===

impl Asking<'_> {
    /// The request, by what it asks: the handshake, a listen, a list, or
    /// something one member owns.
    async fn serve(&self, request: Request, method: ModernMethod, era: ClientEra) -> Reply {
        match method {
            ModernMethod::Discover => {
                let result = self.discover(&request.id).await;
                Reply::result(request.id, result)
            }
            ModernMethod::SubscriptionsListen => self.listen(request).await,
            method => match ListShape::of(method) {
                Some(shape) => {
                    // A legacy client's lists are fetched with its own capabilities, in
                    // the partition its calls are relayed in: they show what it can call.
                    let result = match self.session.and_then(|session| session.envelope()) {
                        Some(envelope) => self.with_envelope(&envelope).list(shape, &request).await,
                        None => self.list(shape, &request).await,
                    };
                    era.reply(request.id, result)
                }
                None => self.call(request, method, era).await,
            },
        }
    }

    /// The same request asked with `envelope` instead (and relaying nothing).
    fn with_envelope<'e>(&'e self, envelope: &'e Envelope) -> Asking<'e> {
        Asking {
            gateway: self.gateway,
            federation: self.federation,
            prefixes: self.prefixes.clone(),
            envelope,
            principal: self.principal,
            session: None,
            client: None,
            sent: SentParams::NoHeaders,
        }
    }

    /// How names are exposed and traced back, with `names` as the exposed names.
    fn naming<'n>(&'n self, names: Option<&'n Names>) -> Naming<'n> {
        Naming {
            mode: self.federation.mode(),
            prefixes: self.prefixes(),
            names,
        }
    }

    /// Each member's prefix, by index.
    fn prefixes(&self) -> &[&str] {
        &self.prefixes
    }

    /// Asks member `member` one request, in the member's own era.
    async fn ask(&self, member: usize, id: Id, method: ModernMethod, params: Option<Value>) -> Reply {
        let era = self
            .federation
            .members()
            .get(member)
            .and_then(|m| m.pool.era_if_known());
        let params = match (era, params) {
            // A legacy member's request has the envelope stripped again: none to insert.
            (Some(Era::Legacy), Some(params)) => params,
            (_, params) => down::legacy_params_for_modern(params, self.envelope),
        };
        self.ask_as_sent(member, id, method, params.into()).await
    }

    /// [`Asking::ask`] with `params` that already carry the envelope (a modern
    /// client's own, still as text when they came so).
    async fn ask_as_sent(&self, member: usize, id: Id, method: ModernMethod, params: LazyJson) -> Reply {
        let Some(pool) = self.federation.members().get(member).map(|m| &m.pool) else {
            return error_reply(id, ErrorObject::internal("no such member"));
        };
        if let Some(refusal) = super::pins::member_refusal(self.gateway, pool.name(), method, &params) {
            return error_reply(id, refusal);
        }
        let request = Request {
            id,
            method: method.as_str().into(),
            params: Some(params),
        };
        let asked;
        // The client's headers go with its own request only, never with one eragate asks.
        let (modern, sent) = match self.client.filter(|client| client.method == method) {
            Some(client) => (client, self.sent),
            None => {
                asked = ModernRequest {
                    method,
                    envelope: self.envelope.clone(),
                };
                (&asked, SentParams::NoHeaders)
            }
        };
        // A member's listen is a share of one counted where it was joined (or eragate's own watch).
        Box::pin(super::modern::serve(
            self.gateway,
            pool,
            request,
            modern,
            sent,
            self.principal,
            ListenCounting::CountedElsewhere,
        ))
        .await
    }

    /// Member `member`'s answer to one request: its result, or why there is none.
    async fn answer(
        &self,
        member: usize,
        id: &Id,
        method: ModernMethod,
        params: Option<Value>,
    ) -> Result<Value, ErrorObject> {
        match self.ask(member, id.clone(), method, params).await {
            Reply::Message(_, Message::Response(response)) => outcome(response),
            Reply::Stream(mut responses, _) => loop {
                match responses.recv().await {
                    Some(Message::Response(response)) => return outcome(response),
                    Some(_) => {} // progress of a list: nobody to show it to
                    None => return Err(ErrorObject::internal("the member ended without an answer")),
                }
            },
            Reply::Rejected(_, rejection) => Err(rejection.error().unwrap_or_else(|| ErrorObject::internal("refused"))),
            Reply::Accepted | Reply::Cancelled(_) | Reply::Message(..) | Reply::Initialized(..) => {
                Err(ErrorObject::internal("the member gave no answer"))
            }
        }
    }

    /// A member left out of an answer: logged and counted.
    fn left_out(&self, member: &str, error: &ErrorObject) {
        self.federation.count_left_out();
        tracing::warn!(federation = %self.federation.name(), %member, error = %error.message, "member left out");
    }

    /// The members' names, for errors.
    fn member_names(&self) -> String {
        let names: Vec<&str> = self.federation.members().iter().map(|m| m.pool.name()).collect();
        names.join(", ")
    }
}

// === impl ClientEra ===

impl ClientEra {
    /// A result (or error) as this client gets it.
    fn reply(self, id: Id, result: Result<Value, ErrorObject>) -> Reply {
        match result {
            Ok(result) => Reply::result(id, self.shape(result)),
            Err(error) => error_reply(id, error),
        }
    }

    /// A result as this client gets it.
    fn shape(self, result: Value) -> Value {
        match self {
            ClientEra::Modern => result,
            ClientEra::Legacy(revision) => up::result_for_legacy(result, revision),
        }
    }

    /// The client's era.
    fn era(self) -> Era {
        match self {
            ClientEra::Modern => Era::Modern,
            ClientEra::Legacy(_) => Era::Legacy,
        }
    }
}

/// A member's response as its result or error.
fn outcome(response: Response) -> Result<Value, ErrorObject> {
    match response.outcome {
        Outcome::Result(result) => Ok(result.into_value()),
        Outcome::Error(error) => Err(error),
    }
}

/// A member's notification with its names exposed under the member's prefix.
fn expose_notification(prefix: &str, notification: &mut Notification) {
    let mut params = notification.params.take().map(LazyJson::into_value);
    route::expose_notification(prefix, &notification.method, &mut params);
    notification.params = params.map(LazyJson::from);
}

/// An error answer to request `id`.
fn error_reply(id: Id, error: ErrorObject) -> Reply {
    Reply::Message(Status::Ok, Response::error(Some(id), error).into_message())
}
