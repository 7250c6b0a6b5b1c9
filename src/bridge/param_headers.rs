//! `Mcp-Param-*` for legacy clients: a modern Streamable HTTP upstream requires
//! a `tools/call` to mirror the arguments its tool schema marks with
//! `x-mcp-header` into headers, which no handshake-era client sends. eragate
//! reads the upstream's own `tools/list` (every page), keeps each tool's
//! annotations for the `ttlMs` the upstream gave, and adds the headers itself.
//! Relisting is bounded per upstream ([`RelistGate`]): one in flight at a time,
//! and a tool the listing does not know relists at most every few seconds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::sessions::ClientSession;
use crate::protocol::Id;
use crate::protocol::envelope::Envelope;
use crate::protocol::jsonrpc::Outcome;
use crate::router::OnDrop;
use crate::router::relist::{RelistGate, Turn};
use crate::translate::down;
use crate::translate::param_headers::{self, ParamHeader};

/// How long a listing is kept when the upstream gives no `ttlMs`.
const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// Bounds of the kept time, whatever the upstream says.
const MIN_TTL: Duration = Duration::from_secs(1);
const MAX_TTL: Duration = Duration::from_secs(3600);
/// Most `tools/list` pages read for one listing (a cursor loop must end).
const MAX_PAGES: usize = 50;

/// Each modern HTTP upstream's tool annotations, by upstream name.
#[derive(Default)]
pub struct ToolHeaderCache {
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

/// One upstream's tools and their annotated arguments (tools without any map to nothing).
struct Listing {
    tools: HashMap<String, Vec<ParamHeader>>,
    until: Instant,
}

/// What the kept listing says about one tool.
enum Lookup {
    /// The listing is fresh and declares the tool: these headers.
    Known(Vec<(String, String)>),
    /// The listing is fresh but does not know the tool (it may be new).
    Unknown,
    /// No listing: none was read yet, or the last relist failed.
    Absent,
    /// The listing expired (its `ttlMs`).
    Stale,
}

impl ToolHeaderCache {
    /// The `Mcp-Param-*` headers for a legacy client's `tools/call` with
    /// `params`, toward `session`'s modern upstream; none when the upstream is not
    /// Streamable HTTP, the tool declares none, or its tools cannot be listed.
    /// An expired listing is relisted; a tool the fresh listing lacks causes a
    /// relist at most every [`crate::router::relist::MIN_RELIST_INTERVAL`];
    /// concurrent relists are one.
    pub async fn headers_for_call(
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
        match entry.lookup(tool, arguments) {
            Lookup::Known(headers) => return headers,
            Lookup::Unknown | Lookup::Absent if entry.relists.relisted_recently() => return Vec::new(),
            Lookup::Unknown | Lookup::Absent | Lookup::Stale => {}
        }
        let relisting = match entry.relists.turn().await {
            // Another call relisted while this one waited: its listing is the answer.
            Turn::Relisted => {
                return match entry.lookup(tool, arguments) {
                    Lookup::Known(headers) => headers,
                    Lookup::Unknown | Lookup::Absent | Lookup::Stale => Vec::new(),
                };
            }
            Turn::Relist(relisting) => relisting,
        };
        let listing = list_tools(session, envelope).await;
        let headers = listing
            .as_ref()
            .and_then(|l| l.tools.get(tool))
            .map(|declared| param_headers::headers_for(declared, arguments))
            .unwrap_or_default();
        if let Some(listing) = listing {
            *entry.listing.write().unwrap_or_else(|e| e.into_inner()) = Some(listing);
        }
        relisting.finished();
        headers
    }

    fn entry(&self, backend: &str) -> Arc<UpstreamTools> {
        let mut upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        upstreams.entry(backend.to_owned()).or_default().clone()
    }
}

impl UpstreamTools {
    fn lookup(&self, tool: &str, arguments: Option<&Value>) -> Lookup {
        let listing = self.listing.read().unwrap_or_else(|e| e.into_inner());
        match listing.as_ref() {
            Some(listing) if listing.until > Instant::now() => match listing.tools.get(tool) {
                Some(declared) => Lookup::Known(param_headers::headers_for(declared, arguments)),
                None => Lookup::Unknown,
            },
            Some(_) => Lookup::Stale,
            None => Lookup::Absent,
        }
    }
}

/// Every page of the upstream's `tools/list`, asked with the client's envelope.
async fn list_tools(session: &ClientSession, envelope: &Envelope) -> Option<Listing> {
    let timeout = session.backend.config().timeout_for("tools/list");
    let mut tools = HashMap::new();
    let mut cursor: Option<String> = None;
    let mut ttl = None;
    for page in 0..MAX_PAGES {
        let params = cursor.take().map(|c| json!({"cursor": c}));
        let params = down::legacy_params_for_modern(params, envelope);
        let id = Id::number(page as u64);
        let call = session
            .upstream()?
            .call("tools/list", Some(params.into()), id, OnDrop::CancelUpstream)
            .await
            .ok()?;
        let response = tokio::time::timeout(timeout, call.response()).await.ok()?.ok()?;
        let Outcome::Result(result) = response.outcome else {
            tracing::debug!(upstream = %session.backend.name(), "tools/list failed; no Mcp-Param headers");
            return None;
        };
        if ttl.is_none() {
            ttl = result.get("ttlMs").and_then(Value::as_u64).map(Duration::from_millis);
        }
        for tool in result.get("tools").and_then(Value::as_array).into_iter().flatten() {
            if let Some(name) = tool.get("name").and_then(Value::as_str) {
                let declared = tool.get("inputSchema").map(param_headers::declared).unwrap_or_default();
                tools.insert(name.to_owned(), declared);
            }
        }
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
            _ => break,
        }
    }
    let ttl = ttl.unwrap_or(DEFAULT_TTL).clamp(MIN_TTL, MAX_TTL);
    Some(Listing {
        tools,
        until: Instant::now() + ttl,
    })
}
