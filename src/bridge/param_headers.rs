//! `Mcp-Param-*` for legacy clients: a modern Streamable HTTP upstream requires
//! a `tools/call` to mirror the arguments its tool schema marks with
//! `x-mcp-header` into headers, which no handshake-era client sends. eragate
//! reads the upstream's own `tools/list` (every page), keeps each tool's
//! annotations for the `ttlMs` the upstream gave, and adds the headers itself.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::sessions::ClientSession;
use crate::protocol::Id;
use crate::protocol::envelope::Envelope;
use crate::protocol::jsonrpc::Outcome;
use crate::router::OnDrop;
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
    listings: RwLock<HashMap<String, Listing>>,
    /// Serialises refreshing, so a burst of calls costs one `tools/list`.
    refreshing: tokio::sync::Mutex<()>,
}

/// One upstream's tools and their annotated arguments (tools without any map to nothing).
struct Listing {
    tools: HashMap<String, Vec<ParamHeader>>,
    until: Instant,
}

impl ToolHeaderCache {
    /// The `Mcp-Param-*` headers for a legacy client's `tools/call` with
    /// `params`, toward `session`'s modern upstream; none when the upstream is not
    /// Streamable HTTP, the tool declares none, or its tools cannot be listed.
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
        let backend = session.backend.name();
        if let Some(headers) = self.fresh_headers(backend, tool, arguments) {
            return headers;
        }
        let _refreshing = self.refreshing.lock().await;
        if let Some(headers) = self.fresh_headers(backend, tool, arguments) {
            return headers; // another call refreshed the listing meanwhile
        }
        let Some(listing) = list_tools(session, envelope).await else {
            return Vec::new();
        };
        let headers = listing
            .tools
            .get(tool)
            .map(|declared| param_headers::headers_for(declared, arguments))
            .unwrap_or_default();
        self.listings
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(backend.to_owned(), listing);
        headers
    }

    /// The headers for `tool` from a listing still fresh; `None` when the
    /// listing is stale or absent, or does not know the tool (it may be new).
    fn fresh_headers(&self, backend: &str, tool: &str, arguments: Option<&Value>) -> Option<Vec<(String, String)>> {
        let listings = self.listings.read().unwrap_or_else(|e| e.into_inner());
        let listing = listings.get(backend)?;
        if listing.until <= Instant::now() {
            return None;
        }
        let declared = listing.tools.get(tool)?;
        Some(param_headers::headers_for(declared, arguments))
    }
}

/// Every page of the upstream's `tools/list`, asked with the client's envelope.
async fn list_tools(session: &ClientSession, envelope: &Envelope) -> Option<Listing> {
    let timeout = session.backend.timeout_for("tools/list");
    let mut tools = HashMap::new();
    let mut cursor: Option<String> = None;
    let mut ttl = None;
    for page in 0..MAX_PAGES {
        let params = cursor.take().map(|c| json!({"cursor": c}));
        let params = down::legacy_params_for_modern(params, envelope);
        let id = Id::number(page as u64);
        let call = session
            .upstream_session
            .call("tools/list", Some(params), id, OnDrop::CancelUpstream)
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
