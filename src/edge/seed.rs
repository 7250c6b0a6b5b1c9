//! `eragate pins seed` (docs/pins.md): an edge with no listener whose one client is eragate
//! itself. For each path serving a pinned upstream (a federation's pinned members included),
//! it speaks to the stdio edge in process as a legacy client would: `initialize`, then every
//! page of `tools/list`, `prompts/list` and `resources/templates/list`. The admission's
//! pinning step sees those listings as it sees any client's, so what has no pins is trusted
//! on first use and written to the store, and what has pins is compared, never overwritten.
//! This module owns that conversation and the summary of what each pinned upstream holds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf};

use crate::gateway::Gateway;
use crate::pins::Kind;
use crate::router::Backend;

/// The revision the seeding client speaks: a legacy one, served by every upstream.
const CLIENT_REVISION: &str = "2025-06-18";

/// How long one request may take, the upstream's start included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Most pages of one listing followed.
const MAX_PAGES: usize = 10_000;

/// Bytes buffered each way between the seeding client and the edge.
const PIPE_BYTES: usize = 1 << 20;

/// What seeding found.
pub struct PinSeed {
    /// The JSON summary `eragate pins seed` prints.
    pub summary: Value,
    /// Whether some pins existed and a listing differed from them.
    pub drifted: bool,
    /// Whether some listing could not be made (but for those a drift under `block` refused).
    pub failed: bool,
}

/// How one listing went.
enum Listing {
    /// Listed to its end, in this many pages.
    Listed(usize),
    /// The upstream does not serve the kind (no capability, or -32601).
    Unsupported,
    /// It failed, for this reason.
    Failed(String),
}

/// The pinned upstreams a path serves, and their names.
struct Target {
    path: String,
    backend: Backend,
    upstreams: Vec<String>,
}

/// Lists every path serving a pinned upstream (only `upstream`'s, when named) and reports
/// what each pinned upstream it serves holds now. `Err` when nothing is pinned there.
pub(crate) async fn seed(gateway: &Arc<Gateway>, upstream: Option<&str>) -> Result<PinSeed, String> {
    let targets = targets(gateway, upstream);
    if targets.is_empty() {
        return Err(match upstream {
            Some(name) => format!("no upstream named {name} has [upstreams.pins] mode other than off"),
            None => "no upstream has [upstreams.pins] mode other than off".into(),
        });
    }
    let before: BTreeMap<String, BTreeMap<Kind, usize>> = targets
        .iter()
        .flat_map(|t| t.upstreams.iter())
        .map(|name| (name.clone(), pinned_counts(gateway, name)))
        .collect();
    let mut upstreams = Vec::new();
    let (mut drifted, mut failed) = (false, false);
    for target in targets {
        tracing::info!(path = %target.path, upstreams = ?target.upstreams, "seeding pins");
        let listings = list_through_edge(gateway, target.backend).await;
        for name in &target.upstreams {
            let Some(book) = gateway.pins().book(name) else {
                continue;
            };
            let after = pinned_counts(gateway, name);
            let was = before.get(name).cloned().unwrap_or_default();
            let drifts: Vec<Value> = book.diff(None)["drifts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| json!({"kind": d["kind"], "name": d["name"], "change": d["change"]}))
                .collect();
            let mut kinds = serde_json::Map::new();
            for kind in Kind::ALL {
                let drifted_kind = drifts.iter().any(|d| d["kind"] == kind.as_str());
                let entry = kind_entry(
                    listings.get(&kind),
                    was.get(&kind).copied().unwrap_or(0),
                    after.get(&kind).copied().unwrap_or(0),
                    drifted_kind,
                );
                // Under `block`, a drift refuses the listings after it: the drift says why.
                failed |= entry["status"] == "failed" && drifts.is_empty();
                kinds.insert(kind.as_str().to_owned(), entry);
            }
            drifted |= !drifts.is_empty();
            let listed = book.list();
            upstreams.push(json!({
                "upstream": name,
                "path": target.path,
                "mode": listed["mode"],
                "store": listed["store"],
                "kinds": kinds,
                "drifts": drifts,
            }));
        }
    }
    let summary = json!({"upstreams": upstreams, "drifted": drifted, "failed": failed});
    Ok(PinSeed {
        summary,
        drifted,
        failed,
    })
}

/// The paths to list: each backend serving a pinned upstream named `upstream` (any, if `None`).
fn targets(gateway: &Gateway, upstream: Option<&str>) -> Vec<Target> {
    let pins = gateway.pins();
    let mut seen: Vec<String> = Vec::new();
    let mut targets = Vec::new();
    for (path, backend) in gateway.router().routes() {
        let served: Vec<String> = match &backend {
            Backend::Pool(pool) => vec![pool.name().to_owned()],
            Backend::Federated(federation) => federation
                .members()
                .iter()
                .map(|member| member.pool.name().to_owned())
                .collect(),
        };
        let pinned: Vec<String> = served
            .into_iter()
            .filter(|name| pins.book(name).is_some() && !seen.contains(name))
            .collect();
        if pinned.is_empty() || upstream.is_some_and(|u| !pinned.iter().any(|n| n == u)) {
            continue;
        }
        seen.extend(pinned.iter().cloned());
        targets.push(Target {
            path,
            backend,
            upstreams: pinned,
        });
    }
    targets.sort_by(|a, b| a.path.cmp(&b.path));
    targets
}

/// How many pins of each kind `upstream` has in its store now.
fn pinned_counts(gateway: &Gateway, upstream: &str) -> BTreeMap<Kind, usize> {
    gateway
        .pins()
        .book(upstream)
        .map(|book| book.pinned_counts())
        .unwrap_or_default()
}

/// One kind's line of the summary: how many are pinned now, and how they came to be.
fn kind_entry(listing: Option<&Listing>, before: usize, after: usize, drifted: bool) -> Value {
    let (status, detail) = match listing {
        _ if drifted => ("drifted", None),
        Some(Listing::Unsupported) => ("unsupported", None),
        Some(Listing::Failed(reason)) => ("failed", Some(reason.clone())),
        None => ("failed", Some("not listed".to_owned())),
        Some(Listing::Listed(_)) if before > 0 => ("already_pinned", None),
        Some(Listing::Listed(_)) if after > 0 => ("written", None),
        Some(Listing::Listed(pages)) if *pages > 1 => (
            "not_pinned",
            Some(format!(
                "listed in {pages} pages: only a listing of one page is trusted on first use"
            )),
        ),
        Some(Listing::Listed(_)) => ("not_pinned", Some("nothing listed".to_owned())),
    };
    let mut entry = json!({"pinned": after, "status": status});
    if let (Some(detail), Some(object)) = (detail, entry.as_object_mut()) {
        object.insert("detail".into(), Value::String(detail));
    }
    entry
}

/// Initializes a legacy client session on `backend` through the stdio edge and lists every
/// kind to its end; then closes the session.
async fn list_through_edge(gateway: &Arc<Gateway>, backend: Backend) -> BTreeMap<Kind, Listing> {
    let (client, server) = tokio::io::duplex(PIPE_BYTES);
    let (input, output) = tokio::io::split(server);
    let serving = super::stdio::serve(Arc::clone(gateway), backend, input, output);
    let listing = async move {
        let (reader, writer) = tokio::io::split(client);
        let mut client = Client {
            lines: BufReader::new(reader).lines(),
            writer,
            next_id: 0,
        };
        let listings = client.list_all().await;
        // Dropping both halves ends the edge's input: it ends the session.
        drop(client);
        listings
    };
    let ((), listings) = tokio::join!(serving, listing);
    listings
}

/// The seeding client's end of the pipe.
struct Client {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    writer: WriteHalf<DuplexStream>,
    next_id: u64,
}

impl Client {
    async fn list_all(&mut self) -> BTreeMap<Kind, Listing> {
        let params = json!({
            "protocolVersion": CLIENT_REVISION,
            "capabilities": {},
            "clientInfo": {"name": "eragate-pins-seed", "version": env!("CARGO_PKG_VERSION")},
        });
        let capabilities = match self.request("initialize", Some(params)).await {
            Ok(Ok(result)) => result.get("capabilities").cloned().unwrap_or(Value::Null),
            Ok(Err(error)) => return failed_all(&format!("initialize: {}", error_text(&error))),
            Err(reason) => return failed_all(&format!("initialize: {reason}")),
        };
        if let Err(reason) = self.notify("notifications/initialized").await {
            return failed_all(&reason);
        }
        let mut listings = BTreeMap::new();
        for kind in Kind::ALL {
            let listing = match capabilities.get(kind.capability()) {
                None | Some(Value::Null) => Listing::Unsupported,
                Some(_) => self.list(kind).await,
            };
            listings.insert(kind, listing);
        }
        listings
    }

    /// Every page of `kind`'s listing.
    async fn list(&mut self, kind: Kind) -> Listing {
        let (method, items) = (kind.list_method(), kind.items_member());
        let mut cursor: Option<String> = None;
        for page in 1..=MAX_PAGES {
            let params = cursor.take().map(|c| json!({"cursor": c}));
            match self.request(method, params).await {
                Err(reason) => return Listing::Failed(format!("{method}: {reason}")),
                Ok(Err(error)) if error.get("code").and_then(Value::as_i64) == Some(-32601) => {
                    return Listing::Unsupported;
                }
                Ok(Err(error)) => return Listing::Failed(format!("{method}: {}", error_text(&error))),
                Ok(Ok(result)) => {
                    if !result.get(items).is_some_and(Value::is_array) {
                        return Listing::Failed(format!("{method}: the result has no {items} array"));
                    }
                    match result.get("nextCursor").and_then(Value::as_str) {
                        Some(next) => cursor = Some(next.to_owned()),
                        None => return Listing::Listed(page),
                    }
                }
            }
        }
        Listing::Failed(format!("{method}: more than {MAX_PAGES} pages"))
    }

    /// Sends a request and waits for its answer: `Ok(Ok(result))`, `Ok(Err(error object))`,
    /// or `Err` when none came.
    async fn request(&mut self, method: &str, params: Option<Value>) -> Result<Result<Value, Value>, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let (Some(params), Some(object)) = (params, request.as_object_mut()) {
            object.insert("params".into(), params);
        }
        self.send(&request).await?;
        match tokio::time::timeout(REQUEST_TIMEOUT, self.answer(id)).await {
            Ok(answer) => answer,
            Err(_) => Err(format!(
                "no answer within {}",
                humantime::format_duration(REQUEST_TIMEOUT)
            )),
        }
    }

    /// The answer to request `id`; what else comes is skipped (notifications) or refused
    /// (requests: the seeding client has no capabilities), but a ping is answered.
    async fn answer(&mut self, id: u64) -> Result<Result<Value, Value>, String> {
        loop {
            let line = match self.lines.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return Err("the edge closed the connection".into()),
                Err(error) => return Err(error.to_string()),
            };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if let Some(method) = message.get("method").and_then(Value::as_str) {
                if let Some(request_id) = message.get("id") {
                    let reply = match method {
                        "ping" => json!({"jsonrpc": "2.0", "id": request_id, "result": {}}),
                        _ => json!({"jsonrpc": "2.0", "id": request_id,
                            "error": {"code": -32601, "message": "eragate pins seed serves no requests"}}),
                    };
                    self.send(&reply).await?;
                }
                continue;
            }
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Ok(Err(error.clone()));
            }
            return Ok(Ok(message.get("result").cloned().unwrap_or(Value::Null)));
        }
    }

    async fn notify(&mut self, method: &str) -> Result<(), String> {
        self.send(&json!({"jsonrpc": "2.0", "method": method})).await
    }

    async fn send(&mut self, message: &Value) -> Result<(), String> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .await
            .map_err(|e| format!("writing to the edge: {e}"))
    }
}

fn failed_all(reason: &str) -> BTreeMap<Kind, Listing> {
    Kind::ALL
        .into_iter()
        .map(|kind| (kind, Listing::Failed(reason.to_owned())))
        .collect()
}

fn error_text(error: &Value) -> String {
    match (error.get("code"), error.get("message").and_then(Value::as_str)) {
        (Some(code), Some(message)) => format!("{message} ({code})"),
        _ => error.to_string(),
    }
}
