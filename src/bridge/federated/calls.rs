//! Calls, reads, gets and completions on a federated path: each is sent to
//! the member that owns what it names, with the member's own name restored,
//! and its answer reshaped for the client. A name the kept names lack makes
//! the federation learn them again before the request is refused, at most
//! once per interval.

use std::sync::Arc;

use serde_json::Value;

use super::lists::Need;
use super::{Asking, ClientEra, error_reply, expose_notification, relay};
use crate::bridge::reply::Reply;
use crate::bridge::sessions::ClientSession;
use crate::federate::names::{Names, PrefixMode};
use crate::federate::route::{self, NameKind};
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::lazy_json::{MemberValue, ParamsView};
use crate::protocol::{Era, ErrorCode, ErrorObject, Id, LazyJson, Message, ModernMethod, Request, Response};
use crate::router::Pool;

impl Asking<'_> {
    /// A call, read, get or completion, sent to the member that owns what it names.
    pub(super) async fn call(&self, request: Request, method: ModernMethod, era: ClientEra) -> Reply {
        let kind = name_kind(method, || request.params.as_deref());
        let needs_names = kind.is_some() && self.federation.mode() != PrefixMode::Always;
        let mut names = None;
        if let (true, Some(kind)) = (needs_names, kind) {
            names = self.names(kind, Need::Kept).await.ok();
        }
        let Request { id, params, .. } = request;
        let params = match (era, self.session, params) {
            (ClientEra::Legacy(_), Some(session), Some(params)) => {
                match self.relay_as_sent(session, &id, method, &params, names.as_deref()) {
                    Some(relaying) => return relaying.await,
                    None => Some(params),
                }
            }
            // Its answer passes as it came (`reshape`): nothing to expose in a call's or get's.
            (ClientEra::Modern, _, Some(params)) => match self.route_as_sent(method, params, names.as_deref()) {
                Ok((member, params)) => return self.ask_as_sent(member, id, method, params).await,
                Err(params) => Some(params),
            },
            (_, _, params) => params,
        };
        let params = params.map(LazyJson::into_value);
        let mut owner = self.naming(names.as_deref()).route_owned(method, params);
        if let (Err((_, params)), true, Some(kind)) = (&mut owner, needs_names, kind) {
            // The names may be older than the member's list: learn them again (paced).
            names = self.names(kind, Need::Unknown).await.ok();
            let params = std::mem::take(params);
            owner = self.naming(names.as_deref()).route_owned(method, Some(params));
        }
        match owner {
            Ok((member, params)) => {
                if let (ClientEra::Legacy(_), Some(session), Some(pool)) =
                    (era, self.session, self.relays_to(member, method))
                {
                    let params = LazyJson::from(params);
                    return Box::pin(relay::relay(
                        (member, pool),
                        session,
                        id,
                        method,
                        params,
                        self.principal,
                    ))
                    .await;
                }
                let prefix = self
                    .federation
                    .members()
                    .get(member)
                    .map(|m| m.prefix.clone())
                    .unwrap_or_default();
                let reply = match era {
                    // A modern client's params carry its envelope already.
                    ClientEra::Modern => self.ask_as_sent(member, id, method, params.into()).await,
                    ClientEra::Legacy(_) => self.ask(member, id, method, Some(params)).await,
                };
                reshape(reply, method, era, prefix)
            }
            Err((name, _)) => {
                let what = match method {
                    ModernMethod::ResourcesRead => "resource",
                    ModernMethod::PromptsGet => "prompt",
                    ModernMethod::CompletionComplete => "reference",
                    _ => "tool",
                };
                let unlisted = kind.map(|kind| self.federation.unlisted(kind)).unwrap_or_default();
                let message = match unlisted.as_slice() {
                    [] => format!(
                        "Unknown {what}: {name:?} is no member's of this federation (members: {})",
                        self.member_names()
                    ),
                    unlisted => format!(
                        "Unknown {what}: {name:?} is no available member's; unavailable: {}",
                        unlisted.join(", ")
                    ),
                };
                let code = match method {
                    ModernMethod::ResourcesRead => ErrorCode::RESOURCE_NOT_FOUND,
                    _ => ErrorCode::INVALID_PARAMS,
                };
                error_reply(id, ErrorObject::new(code, message))
            }
        }
    }

    /// A legacy client's call relayed to its legacy owner with `params` left as
    /// text but for the name (`tools/call` and `prompts/get`, named at the top);
    /// `None` when it is not one (the tree is built and routed as for any other).
    fn relay_as_sent<'r>(
        &'r self,
        session: &'r Arc<ClientSession>,
        id: &Id,
        method: ModernMethod,
        params: &LazyJson,
        names: Option<&Names>,
    ) -> Option<impl Future<Output = Reply> + 'r> {
        if !matches!(method, ModernMethod::ToolsCall | ModernMethod::PromptsGet) {
            return None;
        }
        let members = params.text_members()?;
        let (_, exposed) = members.iter().find(|(key, _)| key == "name")?;
        let exposed: String = serde_json::from_str(exposed).ok()?;
        let (member, own) = self.naming(names).owner(&exposed)?;
        let pool = self.relays_to(member, method)?;
        let own = Value::from(own);
        let params = LazyJson::object_with(members.iter().map(|(key, value)| match key.as_ref() {
            "name" => ("name", MemberValue::Tree(&own)),
            key => (key, MemberValue::Text(value)),
        }));
        Some(Box::pin(relay::relay(
            (member, pool),
            session,
            id.clone(),
            method,
            params,
            self.principal,
        )))
    }

    /// A 2026-07-28 client's `tools/call` or `prompts/get` routed in its params'
    /// text: the owner, and the params with the owner's own name written over
    /// the exposed one, keeping the pass that read `_meta` and found where the
    /// members lie (so that the member's stages read them as a single upstream's
    /// do, without building a tree). `Err` with the params as they came when the
    /// text does not allow it (members not located, no name or several, a name
    /// no member owns): the tree is built and routed as for any other request.
    fn route_as_sent(
        &self,
        method: ModernMethod,
        params: LazyJson,
        names: Option<&Names>,
    ) -> Result<(usize, LazyJson), LazyJson> {
        let routable = matches!(method, ModernMethod::ToolsCall | ModernMethod::PromptsGet)
            && params.has_member("name") == Some(true);
        let owner = routable
            .then(|| ParamsView::str_member(&params, "name"))
            .flatten()
            .and_then(|exposed| self.naming(names).owner(&exposed));
        match owner {
            Some((member, own)) => params.with_member("name", own.as_str()).map(|params| (member, params)),
            None => Err(params),
        }
    }

    /// Member `member`'s upstream when a legacy client's `method` is relayed to it
    /// as it came: a legacy member, and an answer that names nothing to expose. A pinned
    /// member's calls are asked instead, so that its pins check them (`ask_as_sent`).
    fn relays_to(&self, member: usize, method: ModernMethod) -> Option<&Pool> {
        let pool = &self.federation.members().get(member)?.pool;
        let relayed = method != ModernMethod::ResourcesRead
            && pool.era_if_known() == Some(Era::Legacy)
            && !super::super::pins::pinned(self.gateway, pool.name());
        relayed.then_some(pool)
    }
}

/// A member's answer to a routed request as the client gets it: a read's
/// URIs exposed under the member's `prefix`, a legacy client's results
/// reshaped, notifications' URIs exposed. A modern client's call passes as it came.
fn reshape(reply: Reply, method: ModernMethod, era: ClientEra, prefix: String) -> Reply {
    if matches!(era, ClientEra::Modern) && method != ModernMethod::ResourcesRead {
        return reply;
    }
    let reshape_message = move |message: Message| match message {
        Message::Response(Response {
            id,
            outcome: Outcome::Result(result),
        }) => {
            let result = match method {
                ModernMethod::ResourcesRead => route::expose_read(&prefix, result.into_value()).into(),
                _ => result,
            };
            Message::Response(Response {
                id,
                outcome: Outcome::Result(era.shape(result.into_value()).into()),
            })
        }
        Message::Notification(mut notification) => {
            expose_notification(&prefix, &mut notification);
            Message::Notification(notification)
        }
        other => other,
    };
    match reply {
        Reply::Message(status, message) => Reply::Message(status, reshape_message(message)),
        // Reshaped as the client takes each message: no relay task, and the
        // client's end dropped is the member's answer dropped (which cancels it).
        Reply::Stream(responses, _) => Reply::Stream(responses.reshaped_by(reshape_message), era.era()),
        other => other,
    }
}

/// The list kind whose names a request of `method` is routed by.
/// (`params` looked into only for a completion: a call's stay unbuilt.)
fn name_kind<'p>(method: ModernMethod, params: impl FnOnce() -> Option<&'p Value>) -> Option<NameKind> {
    match method {
        ModernMethod::ToolsCall => Some(NameKind::Tools),
        ModernMethod::PromptsGet => Some(NameKind::Prompts),
        ModernMethod::CompletionComplete => {
            let kind = params()?.get("ref")?.get("type")?.as_str()?;
            (kind == "ref/prompt").then_some(NameKind::Prompts)
        }
        _ => None,
    }
}
