//! `Mcp-Param-*`, both ways. For legacy clients: a modern Streamable HTTP
//! upstream requires a `tools/call` to mirror the arguments its tool schema
//! marks with `x-mcp-header` into headers, which no handshake-era client sends;
//! eragate adds them itself ([`UpstreamToolFacts::headers_for_call`]). For
//! 2026-07-28 clients of a legacy upstream, which cannot check them, eragate
//! checks the headers the client sent ([`SentParams`]) against the body as the
//! spec asks of a server ([`UpstreamToolFacts::check_call`]); a modern upstream
//! gets them as they came and checks them itself.
//!
//! Either way eragate reads the upstream's own `tools/list` (every page), keeps
//! each tool's annotations (and, for the tasks of a 2025-11-25 upstream, its
//! `execution.taskSupport`: [`UpstreamToolFacts::task_support`]) for the `ttlMs` the upstream gave, and relists
//! bounded per upstream ([`RelistGate`]): one in flight at a time, and a tool
//! the listing does not know relists at most every few seconds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::pooled_session::pooled_session;
use super::sessions::ClientSession;
use crate::auth::Principal;
use crate::protocol::envelope::Envelope;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::lazy_json::ParamsView;
use crate::protocol::{Id, LazyJson};
use crate::router::relist::{RelistGate, Turn};
use crate::router::{OnDrop, Pool};
use crate::translate::param_headers::{self, ParamHeader, ParamMismatch};
use crate::translate::{ModernRequest, RoutingHeaders, down};

/// How long a listing is kept when the upstream gives no `ttlMs`.
const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// Bounds of the kept time, whatever the upstream says.
const MIN_TTL: Duration = Duration::from_secs(1);
const MAX_TTL: Duration = Duration::from_secs(3600);
/// Most `tools/list` pages read for one listing (a cursor loop must end).
const MAX_PAGES: usize = 50;

/// What each upstream's own `tools/list` says of its tools (annotations, `x-mcp-header`
/// parameters, task support), by upstream name.
#[derive(Default)]
pub(crate) struct UpstreamToolFacts {
    /// A std mutex: held only to find or add an upstream's entry, never across `.await`.
    upstreams: Mutex<HashMap<String, Arc<UpstreamTools>>>,
}

/// One upstream's listing and its refreshing.
#[derive(Default)]
struct UpstreamTools {
    /// A std lock: read or replaced in one step.
    listing: RwLock<Option<Listing>>,
    /// One relist in flight per upstream, and unknown tools relisting at most
    /// every few seconds ([`RelistGate`]). Per upstream, so a slow upstream
    /// delays only its own calls.
    relists: RelistGate,
}

/// One upstream's tools and what eragate reads of each.
struct Listing {
    tools: HashMap<String, ToolFacts>,
    /// Whether any tool declares an annotated argument: when none does, a
    /// 2026-07-28 client's call is checked without reading its tool's name.
    any_declared: bool,
    until: Instant,
}

/// What a 2026-07-28 client sent of `Mcp-Param-*`, threaded from the edge to
/// where the upstream (and so its era) is known.
#[derive(Clone, Copy, Debug)]
pub(crate) enum SentParams<'a> {
    /// Over Streamable HTTP: these headers (lowercase names), perhaps none.
    Http(&'a [(String, String)]),
    /// Over a transport without headers (stdio, an HTTP+SSE post): the spec
    /// lets such clients ignore `x-mcp-header`, so there is nothing to check.
    NoHeaders,
}

/// What eragate reads of one listed tool.
#[derive(Default)]
struct ToolFacts {
    /// Its arguments annotated `x-mcp-header` (none for most tools).
    headers: Vec<ParamHeader>,
    /// Its 2025-11-25 `execution.taskSupport`, when `optional` or `required`.
    task_support: Option<UpstreamTaskSupport>,
}

/// A 2025-11-25 tool's `execution.taskSupport`, when it takes tasks at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UpstreamTaskSupport {
    /// Called with or without a `task`.
    Optional,
    /// Called only with a `task`.
    Required,
}

/// What the kept listing says about one tool (`R`: what was read of its annotations).
enum Lookup<R> {
    /// The listing is fresh and declares the tool.
    Known(R),
    /// The listing is fresh but does not know the tool (it may be new).
    Unknown,
    /// No listing: none was read yet, or the last relist failed.
    Absent,
    /// The listing expired (its `ttlMs`).
    Stale,
}

impl<'a> SentParams<'a> {
    /// What the transport carrying a message sent: its `Mcp-Param-*` headers
    /// (`forwarded`) when it has routing headers at all.
    pub(crate) fn of(routing: RoutingHeaders<'_>, forwarded: &'a [(String, String)]) -> SentParams<'a> {
        match routing {
            RoutingHeaders::Http { .. } => SentParams::Http(forwarded),
            RoutingHeaders::None => SentParams::NoHeaders,
        }
    }

    /// The headers a modern upstream gets as they came, undeclared ones too
    /// (the spec asks intermediaries to forward them).
    pub(crate) fn forwarded(self) -> &'a [(String, String)] {
        match self {
            SentParams::Http(headers) => headers,
            SentParams::NoHeaders => &[],
        }
    }
}

impl UpstreamToolFacts {
    /// Checks a 2026-07-28 client's `tools/call` (`params`) toward the legacy
    /// upstream `pool`, which cannot: every header the called tool declares
    /// must carry the body's value ([`param_headers::check`]). Headers it does
    /// not declare are never sent to a legacy upstream. Tools are listed on a
    /// pooled session of the request's partition; when they cannot be, or the
    /// tool is not among them, there is nothing to check against (the
    /// upstream answers an unknown tool itself).
    pub(crate) async fn check_call(
        &self,
        pool: &Pool,
        params: Option<&LazyJson>,
        modern: &ModernRequest,
        principal: &Principal,
        sent: SentParams<'_>,
    ) -> Result<(), ParamMismatch> {
        let SentParams::Http(sent) = sent else {
            return Ok(());
        };
        let check = |declared: &[ParamHeader]| match declared {
            [] => Ok(()),
            declared => {
                let arguments = params.and_then(|p| p.get("arguments"));
                param_headers::check(declared, arguments, sent)
            }
        };
        let entry = match pool.per_principal() {
            // A listing per principal where each may be shown other tools.
            true => self.entry(&format!("{}\u{0}{}", pool.name(), principal.as_str())),
            false => self.entry(pool.name()),
        };
        if entry.declares_nothing() {
            return Ok(()); // the common case: no tool of this upstream is annotated
        }
        let Some(tool) = params.and_then(|p| ParamsView::str_member(p, "name")) else {
            return Ok(());
        };
        let lister = Lister::Pool(pool, modern, principal);
        entry
            .resolve(&tool, &lister, |facts| check(&facts.headers))
            .await
            .unwrap_or(Ok(()))
    }

    /// The `execution.taskSupport` of the legacy upstream `pool`'s tool named in
    /// `params`, listed as for [`UpstreamToolFacts::check_call`]; `None` for a tool
    /// that takes no tasks, or that no listing knows.
    pub(crate) async fn task_support(
        &self,
        pool: &Pool,
        params: Option<&LazyJson>,
        modern: &ModernRequest,
        principal: &Principal,
    ) -> Option<UpstreamTaskSupport> {
        let tool = params.and_then(|p| ParamsView::str_member(p, "name"))?;
        let entry = match pool.per_principal() {
            true => self.entry(&format!("{}\u{0}{}", pool.name(), principal.as_str())),
            false => self.entry(pool.name()),
        };
        let lister = Lister::Pool(pool, modern, principal);
        entry
            .resolve(&tool, &lister, |facts| facts.task_support)
            .await
            .flatten()
    }

    /// The `Mcp-Param-*` headers for a legacy client's `tools/call` with
    /// `params`, toward `session`'s modern upstream; none when the upstream is not
    /// Streamable HTTP, the tool declares none, or its tools cannot be listed.
    /// An expired listing is relisted; a tool the fresh listing lacks causes a
    /// relist at most every [`crate::router::relist::MIN_RELIST_INTERVAL`];
    /// concurrent relists are one.
    pub(crate) async fn headers_for_call(
        &self,
        session: &ClientSession,
        envelope: &Envelope,
        params: Option<&Value>,
    ) -> Vec<(String, String)> {
        if session.backend.config().http.is_none() {
            return Vec::new(); // only HTTP carries headers
        }
        let Some(tool) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else {
            return Vec::new();
        };
        let arguments = params.and_then(|p| p.get("arguments"));
        let entry = self.entry(session.backend.name());
        let lister = Lister::ClientSession(session, envelope);
        let headers = |facts: &ToolFacts| param_headers::headers_for(&facts.headers, arguments);
        entry.resolve(tool, &lister, headers).await.unwrap_or_default()
    }

    /// The kept listing of `backend` (a name, or a name and principal).
    fn entry(&self, backend: &str) -> Arc<UpstreamTools> {
        let mut upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        // Found without building a key: this runs for every checked call.
        if let Some(entry) = upstreams.get(backend) {
            return entry.clone();
        }
        upstreams.entry(backend.to_owned()).or_default().clone()
    }
}

impl UpstreamTools {
    /// What `read` makes of `tool`'s annotations, from the kept listing or, when
    /// that is stale, absent or lacks the tool, a new one (paced); `None` when
    /// no listing knows the tool.
    async fn resolve<R>(&self, tool: &str, lister: &Lister<'_>, read: impl Fn(&ToolFacts) -> R) -> Option<R> {
        match self.lookup(tool, &read) {
            Lookup::Known(read) => return Some(read),
            Lookup::Unknown | Lookup::Absent if self.relists.relisted_recently() => return None,
            Lookup::Unknown | Lookup::Absent | Lookup::Stale => {}
        }
        let relisting = match self.relists.turn().await {
            // Another call relisted while this one waited: its listing is the answer.
            Turn::Relisted => {
                return match self.lookup(tool, &read) {
                    Lookup::Known(read) => Some(read),
                    Lookup::Unknown | Lookup::Absent | Lookup::Stale => None,
                };
            }
            Turn::Relist(relisting) => relisting,
        };
        let listing = list_tools(lister).await;
        let found = listing.as_ref().and_then(|l| l.tools.get(tool)).map(&read);
        if let Some(listing) = listing {
            *self.listing.write().unwrap_or_else(|e| e.into_inner()) = Some(listing);
        }
        relisting.finished();
        found
    }

    fn lookup<R>(&self, tool: &str, read: impl Fn(&ToolFacts) -> R) -> Lookup<R> {
        let listing = self.listing.read().unwrap_or_else(|e| e.into_inner());
        match listing.as_ref() {
            Some(listing) if listing.until > Instant::now() => match listing.tools.get(tool) {
                Some(facts) => Lookup::Known(read(facts)),
                None => Lookup::Unknown,
            },
            Some(_) => Lookup::Stale,
            None => Lookup::Absent,
        }
    }

    /// Whether a fresh listing says no tool is annotated (no name need be read).
    fn declares_nothing(&self) -> bool {
        let listing = self.listing.read().unwrap_or_else(|e| e.into_inner());
        listing
            .as_ref()
            .is_some_and(|listing| listing.until > Instant::now() && !listing.any_declared)
    }
}

/// Where one upstream's `tools/list` is asked.
enum Lister<'a> {
    /// A legacy client's modern upstream, asked on the client's upstream session with its envelope.
    ClientSession(&'a ClientSession, &'a Envelope),
    /// A legacy upstream, asked on a pooled session of a 2026-07-28 request's partition.
    Pool(&'a Pool, &'a ModernRequest, &'a Principal),
}

impl Lister<'_> {
    fn upstream_name(&self) -> &str {
        match self {
            Lister::ClientSession(session, _) => session.backend.name(),
            Lister::Pool(pool, _, _) => pool.name(),
        }
    }

    /// One page's answer (the `page`th, after `cursor`); `None` when it could not be had.
    async fn page(&self, page: usize, cursor: Option<String>) -> Option<Outcome> {
        let id = Id::number(page as u64);
        let cursor = cursor.map(|c| json!({"cursor": c}));
        match self {
            Lister::ClientSession(session, envelope) => {
                let timeout = session.backend.config().timeout_for("tools/list");
                let params = down::legacy_params_for_modern(cursor, envelope);
                let call = session
                    .upstream()?
                    .call("tools/list", Some(params.into()), id, OnDrop::CancelUpstream)
                    .await
                    .ok()?;
                let response = tokio::time::timeout(timeout, call.response()).await.ok()?.ok()?;
                Some(response.outcome)
            }
            Lister::Pool(pool, modern, principal) => {
                let timeout = pool.timeout_for("tools/list");
                let _permit = pool.admit().await.ok()?;
                let session = pooled_session(pool, modern, principal, false).await.ok()?;
                let call = session
                    .call("tools/list", cursor.map(LazyJson::from), id, OnDrop::CancelUpstream)
                    .await
                    .ok()?;
                let response = tokio::time::timeout(timeout, call.response()).await.ok()?.ok()?;
                Some(response.outcome)
            }
        }
    }
}

/// Every page of the upstream's `tools/list`.
async fn list_tools(lister: &Lister<'_>) -> Option<Listing> {
    let mut tools = HashMap::new();
    let mut cursor: Option<String> = None;
    let mut ttl = None;
    for page in 0..MAX_PAGES {
        let Outcome::Result(result) = lister.page(page, cursor.take()).await? else {
            tracing::debug!(upstream = %lister.upstream_name(), "tools/list failed; Mcp-Param headers unknown");
            return None;
        };
        if ttl.is_none() {
            ttl = result.get("ttlMs").and_then(Value::as_u64).map(Duration::from_millis);
        }
        for tool in result.get("tools").and_then(Value::as_array).into_iter().flatten() {
            if let Some(name) = tool.get("name").and_then(Value::as_str) {
                let headers = tool.get("inputSchema").map(param_headers::declared).unwrap_or_default();
                let task_support = match tool.get("execution").and_then(|e| e.get("taskSupport")) {
                    Some(Value::String(s)) if s == "optional" => Some(UpstreamTaskSupport::Optional),
                    Some(Value::String(s)) if s == "required" => Some(UpstreamTaskSupport::Required),
                    _ => None,
                };
                tools.insert(name.to_owned(), ToolFacts { headers, task_support });
            }
        }
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
            _ => break,
        }
    }
    let ttl = ttl.unwrap_or(DEFAULT_TTL).clamp(MIN_TTL, MAX_TTL);
    Some(Listing {
        any_declared: tools.values().any(|facts| !facts.headers.is_empty()),
        tools,
        until: Instant::now() + ttl,
    })
}
