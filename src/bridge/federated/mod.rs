//! Serving a federated path. Every client request, of either era, becomes
//! 2026-07-28 requests to the members concerned, each served by `modern` in
//! that member's own era (pooled sessions, list cache, translation and all);
//! their answers become one: handshakes merged, lists merged under one sealed
//! cursor, calls routed to their owner with its own name restored, listens
//! joined. The rules are [`crate::federate`]'s; this module only fans out and
//! collects. A member failing or slow is left out of lists, never fails them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::modern::ListenCounting;
use super::reply::{Reply, Responses, Status};
use super::sessions::ClientSession;
use crate::auth::Principal;
use crate::federate::cursor::{Opened, Positions};
use crate::federate::merge::{self, MEMBERS_META, MemberResult};
use crate::federate::names::{Names, PrefixMode};
use crate::federate::page::MergedPage;
use crate::federate::route::{self, ListShape, NameKind, Naming, StaleNames};
use crate::gateway::Gateway;
use crate::protocol::envelope::Envelope;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::lazy_json::{MemberValue, ParamsView};
use crate::protocol::{
    Era, ErrorCode, ErrorObject, Id, LazyJson, Message, ModernMethod, Notification, Request, Response, Revision,
};
use crate::router::federation::{Federation, Member};
use crate::router::gateway_client_info;
use crate::router::{Backend, Pool};
use crate::translate::cache::{Audience, Watch};
use crate::translate::listen::{self, Filter};
use crate::translate::{ModernRequest, down, up};

mod legacy_clients;
mod relay;
mod share;
mod subscriptions;
mod watch;

pub use legacy_clients::serve_legacy;
pub use watch::{never_collisions, spawn_watcher, spawn_watchers};

/// Bound of the messages queued on a joined listen.
const FEDERATED_QUEUE: usize = 64;

/// Most pages of one member read to learn its names.
const MAX_NAME_PAGES: usize = 64;

/// The client's era, which shapes the answer.
#[derive(Clone, Copy)]
enum ClientEra {
    /// A 2026-07-28 client: members' answers as they are.
    Modern,
    /// A handshake-era client: modern-only members removed, content downgraded.
    Legacy(Revision),
}

/// Answers one 2026-07-28 request on `federation`'s path.
pub async fn serve_modern(
    gateway: &Gateway,
    federation: &Arc<Federation>,
    request: Request,
    modern: ModernRequest,
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
}

// === impl Asking ===

impl Asking<'_> {
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
        }
    }

    /// The federation's `server/discover` result: every member's, merged.
    async fn discover(&self, id: &Id) -> Value {
        let members = self.federation.members();
        let answers =
            join_all((0..members.len()).map(|member| self.answer(member, id, ModernMethod::Discover, None))).await;
        let results: Vec<Option<Value>> = answers
            .into_iter()
            .zip(members)
            .map(|(answer, member)| match answer {
                Ok(result) => Some(result),
                Err(error) => {
                    self.left_out(member.pool.name(), &error);
                    None
                }
            })
            .collect();
        let member_results: Vec<MemberResult<'_>> = members
            .iter()
            .zip(&results)
            .map(|(member, result)| MemberResult {
                name: member.pool.name(),
                result: result.as_ref(),
            })
            .collect();
        let mut result = merge::discover(&member_results, &gateway_client_info());
        if let Some(object) = result.as_object_mut() {
            // What the federation offers changes as members come and go.
            object.insert("resultType".into(), Value::from("complete"));
            object.insert("ttlMs".into(), Value::from(0));
            object.insert("cacheScope".into(), Value::from("private"));
        }
        result
    }

    /// A legacy `initialize` result: the merged handshake in the `negotiated` revision.
    async fn initialize(&self, id: &Id, negotiated: Revision) -> Value {
        let discover = self.discover(id).await;
        let mut result = up::initialize_from_discover(&discover, negotiated, &gateway_client_info());
        let members = discover.get("_meta").and_then(|m| m.get(MEMBERS_META)).cloned();
        if let Some(object) = result.as_object_mut() {
            if let Some(members) = members {
                object.insert("_meta".into(), json!({ MEMBERS_META: members }));
            }
            if let Some(capabilities) = object.get_mut("capabilities").and_then(Value::as_object_mut) {
                // The session's GET stream carries the list changes any member announces.
                for kind in ["tools", "prompts", "resources"] {
                    let announced = discover["capabilities"][kind]["listChanged"] == Value::Bool(true);
                    if let (true, Some(flags)) = (announced, capabilities.get_mut(kind).and_then(Value::as_object_mut))
                    {
                        flags.insert("listChanged".into(), Value::Bool(true));
                    }
                }
                // `resources/subscribe` is kept as a listen joined across the owners
                // (`subscriptions`): offered when any member can honour one.
                let subscribable = discover["capabilities"]["resources"]["subscribe"] == Value::Bool(true);
                if let Some(resources) = capabilities.get_mut("resources").and_then(Value::as_object_mut) {
                    match subscribable {
                        true => resources.insert("subscribe".into(), Value::Bool(true)),
                        false => resources.remove("subscribe"),
                    };
                }
            }
        }
        result
    }

    /// One page of a federated list: a page of every member still listing.
    async fn list(&self, shape: ListShape, request: &Request) -> Result<Value, ErrorObject> {
        let members = self.federation.members();
        let sealer = self.gateway.sessions().sealer();
        let cursor = request.params.as_ref().and_then(|p| p.get("cursor"));
        let cursor = match cursor {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(cursor.as_str()),
            Some(_) => return Err(ErrorObject::invalid_params("Invalid params: cursor must be a string")),
        };
        let mut positions = match Positions::open(sealer, cursor, members.len(), Instant::now()) {
            Opened::First(positions) | Opened::Resumed(positions) => positions,
            Opened::Invalid => return Err(ErrorObject::invalid_params("Invalid params: unknown cursor")),
        };
        let fetch: Vec<(usize, Option<String>)> = positions
            .to_fetch()
            .into_iter()
            .map(|(member, at)| (member, at.map(str::to_owned)))
            .collect();
        let pages = join_all(
            fetch
                .iter()
                .map(|(member, at)| self.page(*member, shape, at.as_deref(), &request.id)),
        )
        .await;
        let mut names = self.names_for(shape, false).await?;
        let stale = pages.iter().zip(&fetch).any(|(page, (member, _))| {
            page.as_ref().is_ok_and(|page| {
                self.naming(names.as_deref())
                    .expose_items(shape, *member, page)
                    .is_err()
            })
        });
        if stale {
            names = self.names_for(shape, true).await?;
        }
        let naming = self.naming(names.as_deref());
        let mut merged = MergedPage::default();
        for ((member, _), page) in fetch.iter().zip(pages) {
            let name = members.get(*member).map_or("", |m| m.pool.name());
            let exposed = page.and_then(|page| {
                let items = naming.expose_items(shape, *member, &page).map_err(|StaleNames| {
                    ErrorObject::internal("its names changed while the federation listed them")
                })?;
                Ok((page, items))
            });
            match exposed {
                Ok((page, items)) => {
                    merged.add(&page, items);
                    positions.answered(*member, next_cursor(&page));
                }
                Err(error) => {
                    self.left_out(name, &error);
                    merged.leave_out(name, error);
                    positions.failed(*member);
                }
            }
        }
        let mut result = merged.into_result(shape, positions.next_cursor(sealer))?;
        // Members' hints merged, then bounded by the federation's own rule: a list
        // filtered per caller, or fetched with callers' own credentials, is private.
        let audience = match self.federation.per_principal() || self.gateway.auth().filters_lists() {
            true => Audience::PerCaller,
            false => Audience::Unproven,
        };
        let policy = self.federation.cache_policy().with_facts(Watch::Blind, audience);
        if let Some(object) = result.as_object_mut() {
            policy.apply(object);
        }
        Ok(result)
    }

    /// One page of member `member`'s list `shape` at its own cursor `at`.
    async fn page(&self, member: usize, shape: ListShape, at: Option<&str>, id: &Id) -> Result<Value, ErrorObject> {
        let params = at.map(|cursor| json!({ "cursor": cursor }));
        self.answer(member, id, list_method(shape), params).await
    }

    /// The exposed names a list of `shape` needs: none for resources or under
    /// `always`; else the names kept, or (`rebuild`, or none kept) built anew
    /// from complete listings of every member.
    async fn names_for(&self, shape: ListShape, rebuild: bool) -> Result<Option<Arc<Names>>, ErrorObject> {
        match shape {
            ListShape::Named(kind) if self.federation.mode() != PrefixMode::Always => {
                self.names(kind, rebuild).await.map(Some)
            }
            _ => Ok(None),
        }
    }

    async fn names(&self, kind: NameKind, rebuild: bool) -> Result<Arc<Names>, ErrorObject> {
        if !rebuild && let Some(names) = self.federation.names(kind) {
            return Ok(names);
        }
        let members = self.federation.members();
        let listed = join_all((0..members.len()).map(|member| self.every_name(member, kind))).await;
        let unlisted: Vec<String> = listed
            .iter()
            .zip(members)
            .filter(|((_, complete), _)| matches!(complete, Listing::Partial))
            .map(|(_, member)| member.pool.name().to_owned())
            .collect();
        let lists: Vec<Vec<String>> = listed.into_iter().map(|(names, _)| names).collect();
        let names = route::build_names(self.federation.mode(), self.prefixes(), &lists).map_err(|collision| {
            tracing::error!(federation = %self.federation.name(), %collision, "members' names collide");
            ErrorObject::internal(collision)
        })?;
        let names = Arc::new(names);
        self.federation.keep_names(kind, names.clone(), unlisted);
        Ok(names)
    }

    /// Every name member `member` lists of `kind`; what it listed before
    /// failing (nothing, if it is down), then said [`Listing::Partial`].
    async fn every_name(&self, member: usize, kind: NameKind) -> (Vec<String>, Listing) {
        let shape = ListShape::Named(kind);
        let id = Id::number(0);
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_NAME_PAGES {
            let Ok(page) = self.page(member, shape, cursor.as_deref(), &id).await else {
                return (names, Listing::Partial);
            };
            names.extend(route::item_names(shape, &page));
            cursor = next_cursor(&page);
            if cursor.is_none() {
                return (names, Listing::Complete);
            }
        }
        (names, Listing::Complete) // as many pages as a listing may take
    }

    fn naming<'n>(&'n self, names: Option<&'n Names>) -> Naming<'n> {
        Naming {
            mode: self.federation.mode(),
            prefixes: self.prefixes(),
            names,
        }
    }

    fn prefixes(&self) -> &[&str] {
        &self.prefixes
    }

    /// A call, read, get or completion, sent to the member that owns what it names.
    async fn call(&self, request: Request, method: ModernMethod, era: ClientEra) -> Reply {
        let kind = name_kind(method, || request.params.as_deref());
        let needs_names = kind.is_some() && self.federation.mode() != PrefixMode::Always;
        let mut names = None;
        if let (true, Some(kind)) = (needs_names, kind) {
            names = self.names(kind, false).await.ok();
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
            // The names may be older than the member's list: learn them again once.
            names = self.names(kind, true).await.ok();
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

    /// A 2026-07-28 listen joined across the members: each member's listen
    /// opened with its own share of the filter; one acknowledgement of what
    /// any honours; then every member's notifications, URIs exposed.
    async fn listen(&self, request: Request) -> Reply {
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
    async fn joined_listen(
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
                let share = share::Share {
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
    /// as it came: a legacy member, and an answer that names nothing to expose.
    fn relays_to(&self, member: usize, method: ModernMethod) -> Option<&Pool> {
        let pool = &self.federation.members().get(member)?.pool;
        let relayed = method != ModernMethod::ResourcesRead && pool.era_if_known() == Some(Era::Legacy);
        relayed.then_some(pool)
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
        let request = Request {
            id,
            method: method.as_str().into(),
            params: Some(params),
        };
        let asked;
        let modern = match self.client.filter(|client| client.method == method) {
            Some(client) => client,
            None => {
                asked = ModernRequest {
                    method,
                    envelope: self.envelope.clone(),
                };
                &asked
            }
        };
        // A member's listen is a share of one counted where it was joined (or eragate's own watch).
        Box::pin(super::modern::serve(
            self.gateway,
            pool,
            request,
            modern,
            &[],
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

    fn member_names(&self) -> String {
        let names: Vec<&str> = self.federation.members().iter().map(|m| m.pool.name()).collect();
        names.join(", ")
    }
}

/// Whether a member's names were all listed.
enum Listing {
    /// To its last page.
    Complete,
    /// It failed before its last page.
    Partial,
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

    fn shape(self, result: Value) -> Value {
        match self {
            ClientEra::Modern => result,
            ClientEra::Legacy(revision) => up::result_for_legacy(result, revision),
        }
    }

    fn era(self) -> Era {
        match self {
            ClientEra::Modern => Era::Modern,
            ClientEra::Legacy(_) => Era::Legacy,
        }
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

fn list_method(shape: ListShape) -> ModernMethod {
    match shape {
        ListShape::Named(kind) => kind.list_method(),
        ListShape::Resources => ModernMethod::ResourcesList,
        ListShape::Templates => ModernMethod::ResourceTemplatesList,
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
fn list_changed_method(method: &str) -> &'static str {
    match method {
        "notifications/tools/list_changed" => "notifications/tools/list_changed",
        "notifications/prompts/list_changed" => "notifications/prompts/list_changed",
        _ => "notifications/resources/list_changed",
    }
}

fn next_cursor(page: &Value) -> Option<String> {
    page.get("nextCursor").and_then(Value::as_str).map(str::to_owned)
}

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
async fn listen_unprompted(
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
    };
    Some(
        asking
            .ask(member, id, ModernMethod::SubscriptionsListen, Some(params))
            .await,
    )
}

fn error_reply(id: Id, error: ErrorObject) -> Reply {
    Reply::Message(Status::Ok, Response::error(Some(id), error).into_message())
}
