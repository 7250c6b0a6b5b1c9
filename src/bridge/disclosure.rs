//! The disclosure step (`[[disclosure]] mode = "search"`): on such a path a
//! `tools/list` shows the `always` tools (and a session's loaded ones) with
//! eragate's meta-tools, and calls of the meta-tools are served here. It runs
//! before the admission stage: `call_tool` becomes the direct call of the tool
//! it names, which every step then admits under its real name; the listings
//! this step reads are ordinary `tools/list` requests of the caller, admitted
//! and narrowed like any. Listing is disclosure, not permission: a tool the
//! caller may call is callable by name whether it is listed or not.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::client_session::ClientSession;
use super::reply::{Reply, Status};
use crate::config::{Config, DisclosureConfig, DisclosureMode};
use crate::disclosure::meta::{self, MetaResult};
use crate::disclosure::{Catalogue, Catalogues};
use crate::gateway::Gateway;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{ErrorCode, ErrorObject, Id, Message, Notification, Request, Response};
use crate::router::Backend;

/// Most pages one listing is read in: a path offering more is refused.
const MAX_PAGES: usize = 100;

/// Reads one page of the path's tools as the caller sees them (`cursor`: the
/// page after the one that gave it). The reply is to a request of its own.
pub(crate) trait Lister: Send + Sync {
    /// One page of `tools/list`.
    fn page(&self, cursor: Option<String>) -> Pin<Box<dyn Future<Output = Reply> + Send + '_>>;
}

/// What the step does with a message.
#[derive(Clone, Copy)]
pub(crate) enum Step {
    /// Nothing: the message goes on as it came.
    Pass,
    /// A `tools/list`: answered with the disclosed listing.
    List,
    /// A call of this meta-tool.
    Meta(&'static str),
    /// A legacy `initialize`: its answer announces that the tool list changes.
    Initialize,
}

/// The disclosure of one path, as the applied configuration sets it.
pub(crate) struct Disclosure {
    /// The configuration applied when the request came.
    config: Arc<Config>,
    /// Its `[[disclosure]]` entry for the path.
    at: usize,
}

/// What a meta-tool call came to.
pub(crate) enum MetaOutcome {
    /// Answered here.
    Answered(Box<Reply>),
    /// `call_tool` of a tool the caller may see: the message is now that tool's
    /// direct call, named here, to be admitted and routed as one.
    Call(String),
}

impl Disclosure {
    /// The disclosure on `backend`'s path, when it searches.
    pub(crate) fn of(gateway: &Gateway, backend: &Backend) -> Option<Disclosure> {
        let config = gateway.limits();
        if config.disclosure.is_empty() {
            return None;
        }
        let path = backend.config().path.as_str();
        let at = config
            .disclosure
            .iter()
            .position(|e| e.path == path && e.mode == DisclosureMode::Search)?;
        Some(Disclosure {
            config: arc_swap::Guard::into_inner(config),
            at,
        })
    }

    fn entry(&self) -> &DisclosureConfig {
        &self.config.disclosure[self.at]
    }

    /// What the step does with `message` from a client with or without a session.
    pub(crate) fn step(message: &Message) -> Step {
        let Message::Request(request) = message else {
            return Step::Pass;
        };
        match request.method.as_str() {
            // A cursor is from a listing before disclosure: the page it names is served as it is.
            "tools/list" if request.params.as_ref().is_none_or(|p| p.get("cursor").is_none()) => Step::List,
            "initialize" => Step::Initialize,
            "tools/call" => {
                let name = request
                    .params
                    .as_ref()
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str);
                name.and_then(meta::meta_tool).map_or(Step::Pass, Step::Meta)
            }
            _ => Step::Pass,
        }
    }

    /// Answers the `tools/list` request `id` with the disclosed listing (every
    /// tool while the caller sees no more than the threshold).
    pub(crate) async fn list(
        &self,
        id: Id,
        lister: &dyn Lister,
        session: Option<&ClientSession>,
        modern: bool,
    ) -> Reply {
        let (mut result, tools) = match listing(lister, &id).await {
            Ok(listing) => listing,
            Err(refused) => return *refused,
        };
        if let Err(collided) = self.check_collision(&tools, &id) {
            return *collided;
        }
        let shown = if tools.len() <= self.entry().threshold {
            tools
        } else {
            let loaded = session.map(ClientSession::loaded_tools).unwrap_or_default();
            let with_session = session.is_some() && !modern;
            meta::disclosed(
                &tools,
                &self.entry().always,
                &loaded,
                with_session,
                crate::config::MAX_SEARCH_LIMIT,
            )
        };
        result.insert("tools".into(), Value::Array(shown));
        Reply::result(id, Value::Object(result))
    }

    /// Serves a call of the meta-tool `name` in `message`; `call_tool` of a
    /// tool the caller may see rewrites `message` into its direct call.
    pub(crate) async fn meta(
        &self,
        name: &'static str,
        message: &mut Message,
        lister: &dyn Lister,
        session: Option<&ClientSession>,
        modern: bool,
        catalogues: &Catalogues,
    ) -> MetaOutcome {
        let Message::Request(request) = message else {
            return MetaOutcome::Answered(Box::new(Reply::Accepted));
        };
        let id = request.id.clone();
        let arguments = request.params.as_ref().and_then(|p| p.get("arguments")).cloned();
        let answer = |result: MetaResult| MetaOutcome::Answered(Box::new(meta_reply(id.clone(), result, modern)));
        // Arguments first: a call that cannot be served costs no listing.
        let parsed = match name {
            meta::SEARCH_TOOLS => {
                meta::search_arguments(arguments.as_ref(), self.entry().limit).map(|(q, l)| Parsed::Search(q, l))
            }
            meta::CALL_TOOL => meta::call_arguments(arguments.as_ref()).map(|(n, a)| Parsed::Call(n, a)),
            _ if session.is_none() || modern => Err(meta::load_needs_session()),
            _ => meta::load_arguments(arguments.as_ref()).map(Parsed::Load),
        };
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(error) => return answer(error),
        };
        let tools = match listing(lister, &id).await {
            Ok((_, tools)) => tools,
            Err(refused) => return MetaOutcome::Answered(refused),
        };
        if let Err(collided) = self.check_collision(&tools, &id) {
            return MetaOutcome::Answered(collided);
        }
        let catalogue = catalogues.of(tools);
        match parsed {
            Parsed::Search(query, limit) => answer(meta::search(&catalogue, &query, limit)),
            Parsed::Call(tool, arguments) => match catalogue.named(&tool) {
                None => answer(meta::unknown_tool(meta::CALL_TOOL, &tool, &catalogue)),
                Some(_) => {
                    direct_call(request, &tool, arguments);
                    MetaOutcome::Call(tool)
                }
            },
            Parsed::Load(names) => MetaOutcome::Answered(Box::new(load(id, &names, &catalogue, session))),
        }
    }

    /// A listing holding a tool named as a meta-tool is a configuration error:
    /// answered so, naming both.
    fn check_collision(&self, tools: &[Value], id: &Id) -> Result<(), Box<Reply>> {
        let Some(name) = meta::collision(tools) else {
            return Ok(());
        };
        let message = format!(
            "configuration error: the tool {name:?} on path {} collides with eragate's meta-tool {name:?} \
             ([[disclosure]] mode = \"search\"); rename it with [[policies]] tools.rename, or turn disclosure off",
            self.entry().path
        );
        tracing::error!(path = %self.entry().path, tool = name, "{message}");
        let error = ErrorObject::new(ErrorCode::INTERNAL_ERROR, message);
        Err(error_reply(Status::Ok, id, error))
    }
}

/// A meta-tool call's arguments, checked.
enum Parsed {
    Search(String, usize),
    Call(String, Option<Value>),
    Load(Vec<String>),
}

/// The answer to `initialize`, announcing `tools.listChanged`: `load_tools` changes the list.
pub(crate) fn announcing_list_changes(reply: Reply) -> Reply {
    let Reply::Initialized(mut message, session) = reply else {
        return reply;
    };
    if let Message::Response(Response {
        outcome: Outcome::Result(result),
        ..
    }) = &mut message
    {
        let result: &mut Value = result;
        if let Some(capabilities) = result.get_mut("capabilities").and_then(Value::as_object_mut) {
            let tools = capabilities.entry("tools").or_insert_with(|| Value::Object(Map::new()));
            if let Some(tools) = tools.as_object_mut() {
                tools.insert("listChanged".into(), Value::Bool(true));
            }
        }
    }
    Reply::Initialized(message, session)
}

/// `request` (a `call_tool` call) made the call of `tool` with `arguments`; its
/// other params (`_meta`, input responses, request state) stay as they came.
fn direct_call(request: &mut Request, tool: &str, arguments: Option<Value>) {
    let params = request.params.get_or_insert_with(Default::default);
    let params: &mut Value = params;
    if let Value::Object(members) = params {
        members.insert("name".into(), Value::String(tool.to_owned()));
        match arguments {
            Some(arguments) => members.insert("arguments".into(), arguments),
            None => members.remove("arguments"),
        };
    }
}

/// Adds `names` to the session's listing and tells the client its listing changed.
fn load(id: Id, names: &[String], catalogue: &Catalogue, session: Option<&ClientSession>) -> Reply {
    let Some(session) = session else {
        return meta_reply(id, meta::load_needs_session(), false);
    };
    let unknown: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| catalogue.named(n).is_none())
        .collect();
    if !unknown.is_empty() {
        return meta_reply(id, meta::unknown_tools(&unknown, catalogue), false);
    }
    if !session.load_tools(names, meta::MAX_LOADED) {
        return meta_reply(id, meta::too_many_loaded(), false);
    }
    let changed = Message::Notification(Notification {
        method: "notifications/tools/list_changed".into(),
        params: None,
    });
    let answer = Response::result(id, meta::loaded(names).into_value()).into_message();
    let (tx, rx) = mpsc::channel(2);
    // Both fit: the channel is new and holds two.
    let _ = tx.try_send(changed);
    let _ = tx.try_send(answer);
    Reply::Stream(rx.into(), crate::protocol::Era::Legacy)
}

/// A meta-tool's result to the request `id`, as the client's era writes it.
fn meta_reply(id: Id, result: MetaResult, modern: bool) -> Reply {
    let mut value = result.into_value();
    if modern && let Value::Object(members) = &mut value {
        members.insert("resultType".into(), Value::from("complete"));
    }
    Reply::result(id, value)
}

/// Every page of the path's tools as the caller sees them: the first page's
/// result without its tools and cursor, and the tools. A refusal or error is
/// the answer to `id`.
async fn listing(lister: &dyn Lister, id: &Id) -> Result<(Map<String, Value>, Vec<Value>), Box<Reply>> {
    let mut first: Option<Map<String, Value>> = None;
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let mut result = page_result(lister.page(cursor.take()).await, id).await?;
        if let Some(Value::Array(page)) = result.remove("tools") {
            tools.extend(page);
        }
        cursor = match result.remove("nextCursor") {
            Some(Value::String(next)) if !next.is_empty() => Some(next),
            _ => None,
        };
        if first.is_none() {
            first = Some(result);
        }
        if cursor.is_none() {
            return Ok((first.unwrap_or_default(), tools));
        }
    }
    let error = ErrorObject::new(
        ErrorCode::INTERNAL_ERROR,
        format!("tools/list: the path lists its tools in more than {MAX_PAGES} pages"),
    );
    Err(error_reply(Status::Ok, id, error))
}

/// The result object of one page's reply, or the reply as the answer to `id`.
async fn page_result(reply: Reply, id: &Id) -> Result<Map<String, Value>, Box<Reply>> {
    let (status, message) = match reply {
        Reply::Rejected(_, rejection) => return Err(Box::new(Reply::Rejected(Some(id.clone()), rejection))),
        Reply::Message(status, message) => (status, Some(message)),
        other => (Status::Ok, super::reply::final_response(other).await),
    };
    let outcome = match message {
        Some(Message::Response(Response { outcome, .. })) => outcome,
        _ => Outcome::Error(ErrorObject::new(
            ErrorCode::INTERNAL_ERROR,
            "tools/list: the path gave no answer",
        )),
    };
    match outcome {
        Outcome::Result(result) => match result.into_value() {
            Value::Object(result) => Ok(result),
            _ => Err(Box::new(invalid(id))),
        },
        Outcome::Error(error) => Err(error_reply(status, id, error)),
    }
}

fn invalid(id: &Id) -> Reply {
    let error = ErrorObject::new(ErrorCode::INTERNAL_ERROR, "tools/list: the path answered no object");
    *error_reply(Status::Ok, id, error)
}

/// `error` as the answer to `id`.
fn error_reply(status: Status, id: &Id, error: ErrorObject) -> Box<Reply> {
    Box::new(Reply::Message(
        status,
        Response::error(Some(id.clone()), error).into_message(),
    ))
}
