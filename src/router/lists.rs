//! The lists eragate keeps for one backend: pages of `tools/list`,
//! `prompts/list`, `resources/list` and `resources/templates/list` per
//! partition (principal, capability profile) and cursor, as the upstream
//! answered them. A page is kept only while eragate can tell it is current:
//! the upstream announces list changes on the sessions it listens to
//! ([`ListCache::watch`]), or the page is re-listed once older than the
//! configured interval. Bounded by entry count; never shared across principals.
//! The caching hints the pages get are decided in [`crate::translate::cache`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::UpstreamSession;
use crate::config::CacheConfig;
use crate::protocol::{Message, ModernMethod};
use crate::translate::cache::{Audience, Watch, list_digest};

/// The four list methods, as the key of what a `list_changed` invalidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ListKind {
    /// `tools/list`.
    Tools,
    /// `prompts/list`.
    Prompts,
    /// `resources/list` and `resources/templates/list` (one notification covers both).
    Resources,
}

impl ListKind {
    /// The kind of a list method; `None` for any other method.
    pub fn of(method: ModernMethod) -> Option<ListKind> {
        match method {
            ModernMethod::ToolsList => Some(ListKind::Tools),
            ModernMethod::PromptsList => Some(ListKind::Prompts),
            ModernMethod::ResourcesList | ModernMethod::ResourceTemplatesList => Some(ListKind::Resources),
            _ => None,
        }
    }

    fn of_notification(method: &str) -> Option<ListKind> {
        match method {
            "notifications/tools/list_changed" => Some(ListKind::Tools),
            "notifications/prompts/list_changed" => Some(ListKind::Prompts),
            "notifications/resources/list_changed" => Some(ListKind::Resources),
            _ => None,
        }
    }

    /// The capability whose `listChanged` says the upstream announces changes.
    fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One page of one list as one partition sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PageKey {
    /// Who asked.
    pub principal: String,
    /// With which capabilities (canonical JSON).
    pub profile: String,
    /// The list method.
    pub method: ModernMethod,
    /// The cursor asked for (`None`: the first page).
    pub cursor: Option<String>,
}

/// A kept page.
#[derive(Clone, Debug)]
pub struct Page {
    /// The upstream's result, untranslated.
    pub result: Arc<Value>,
    /// The upstream's identity (for a modern client's `_meta`).
    pub server_info: Arc<Value>,
    /// How eragate learns that it changed.
    pub watch: Watch,
    fetched: Instant,
    digest: u64,
    /// The session it came from (its address), whose end ends the page.
    session: usize,
}

/// Taken before a page is fetched: a change announced while it was in flight
/// keeps it from being stored.
#[must_use]
pub struct Ticket {
    kind: ListKind,
    generation: u64,
}

/// What the principals that fetched one page got.
struct Across {
    /// The digest all got; `None` once two fetches differed.
    digest: Option<u64>,
    /// The first principal that fetched it.
    first: String,
    /// Whether another did too.
    several: bool,
}

impl Inner {
    /// Notes that `key`'s principal got `digest` (pages past `max` are not followed: unproven).
    fn record(&mut self, key: &PageKey, digest: u64, max: usize) {
        let page = (key.method, key.cursor.clone());
        if !self.across.contains_key(&page) && self.across.len() >= max {
            return;
        }
        let seen = self.across.entry(page).or_insert_with(|| Across {
            digest: Some(digest),
            first: key.principal.clone(),
            several: false,
        });
        if seen.digest != Some(digest) {
            seen.digest = None;
        }
        seen.several |= seen.first != key.principal;
    }

    /// Forgets every page of `kind`, and what principals were seen to get.
    fn drop_kind(&mut self, kind: ListKind) {
        self.generations[kind.index()] += 1;
        self.pages.retain(|key, _| ListKind::of(key.method) != Some(kind));
        self.across.retain(|(method, _), _| ListKind::of(*method) != Some(kind));
    }
}

/// The pages kept for one backend.
pub struct ListCache {
    relist: Option<Duration>,
    max_entries: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    pages: HashMap<PageKey, Page>,
    /// Per page of a list, what the principals that fetched it got.
    across: HashMap<(ModernMethod, Option<String>), Across>,
    /// Bumped by every change of a kind.
    generations: [u64; 3],
    /// Sessions listened to (their addresses).
    watched: HashSet<usize>,
}

impl ListCache {
    /// An empty cache bounded as `config` says.
    pub fn new(config: &CacheConfig) -> ListCache {
        ListCache {
            relist: config.relist_interval(),
            max_entries: config.max_entries(),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The page `key`, if it is kept and still current at `now`.
    pub fn lookup(&self, key: &PageKey, now: Instant) -> Option<Page> {
        let inner = self.lock();
        let page = inner.pages.get(key)?;
        // A page past its time stays until it is re-listed: the new digest tells whether it changed.
        let watch = match page.watch {
            Watch::Notified => Watch::Notified,
            Watch::Relisted(ms) => {
                let age = u32::try_from(now.saturating_duration_since(page.fetched).as_millis()).unwrap_or(u32::MAX);
                // What is left of the interval is what eragate can still promise.
                Watch::Relisted(ms.checked_sub(age).filter(|left| *left > 0)?)
            }
            Watch::Blind => return None,
        };
        Some(Page { watch, ..page.clone() })
    }

    /// Before fetching a page of `kind`.
    pub fn ticket(&self, kind: ListKind) -> Ticket {
        Ticket {
            kind,
            generation: self.lock().generations[kind.index()],
        }
    }

    /// How a page of `kind` fetched on `session` would be known to change:
    /// announced, if the upstream said it announces such changes and eragate
    /// listens on the session; else re-listed, if an interval is configured.
    pub fn watch_for(&self, kind: ListKind, session: &Arc<UpstreamSession>) -> Watch {
        let announces = session
            .initialize_result()
            .and_then(|r| {
                r.get("capabilities")?
                    .get(kind.capability())?
                    .get("listChanged")?
                    .as_bool()
            })
            .unwrap_or(false);
        let listening = self.lock().watched.contains(&address(session));
        match (announces && listening, self.relist) {
            (true, _) => Watch::Notified,
            (false, Some(interval)) => Watch::Relisted(u32::try_from(interval.as_millis()).unwrap_or(u32::MAX)),
            (false, None) => Watch::Blind,
        }
    }

    /// Keeps `page` as `key` (unless a change came since `ticket`, or it is
    /// not watched), and records its digest for comparison across principals.
    pub fn store(&self, key: PageKey, ticket: Ticket, page: PageParts, session: &Arc<UpstreamSession>, now: Instant) {
        let digest = list_digest(&page.result);
        let mut inner = self.lock();
        if inner.generations[ticket.kind.index()] != ticket.generation {
            return; // changed while it was fetched: it may already be old
        }
        if inner.pages.get(&key).is_some_and(|old| old.digest != digest) {
            tracing::debug!(method = key.method.as_str(), "re-listed: the list changed");
            inner.drop_kind(ticket.kind);
        }
        inner.record(&key, digest, self.max_entries);
        if page.watch == Watch::Blind {
            return;
        }
        if inner.pages.len() >= self.max_entries && !inner.pages.contains_key(&key) {
            let oldest = inner
                .pages
                .iter()
                .min_by_key(|(_, p)| p.fetched)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(oldest) => inner.pages.remove(&oldest),
                None => return, // max_entries = 0: nothing is kept
            };
        }
        let page = Page {
            result: page.result,
            server_info: page.server_info,
            watch: page.watch,
            fetched: now,
            digest,
            session: address(session),
        };
        inner.pages.insert(key, page);
    }

    /// Who the page `key` may differ for, as far as eragate has seen:
    /// `per_principal` when the upstream is reached with each principal's own
    /// credential or the gateway filters lists per caller.
    pub fn audience(&self, key: &PageKey, per_principal: bool) -> Audience {
        if per_principal {
            return Audience::PerCaller;
        }
        match self.lock().across.get(&(key.method, key.cursor.clone())) {
            None => Audience::Unproven,
            Some(Across { digest: None, .. }) => Audience::PerCaller,
            // Without authentication every caller is the one (empty) principal.
            Some(seen) if seen.several || seen.first.is_empty() => Audience::Anyone,
            Some(_) => Audience::Unproven,
        }
    }

    /// Listens to `session`'s announcements from now on (once per session):
    /// a list change drops every kept page of its kind; the session's end
    /// drops the pages fetched on it (their changes could no longer be heard).
    pub fn watch(self: &Arc<Self>, session: &Arc<UpstreamSession>) {
        let at = address(session);
        if !self.lock().watched.insert(at) {
            return;
        }
        let mut announcements = session.subscribe();
        let cache: Weak<ListCache> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let received = announcements.recv().await;
                let Some(cache) = cache.upgrade() else { return };
                match received {
                    Ok(Message::Notification(n)) => {
                        if let Some(kind) = ListKind::of_notification(&n.method) {
                            tracing::debug!(method = %n.method, "list changed upstream: kept pages dropped");
                            cache.changed(kind);
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => cache.changed_all(),
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        cache.session_ended(at);
                        return;
                    }
                }
            }
        });
    }

    /// How many pages are kept (for the admin view).
    pub fn len(&self) -> usize {
        self.lock().pages.len()
    }

    /// Whether no page is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn changed(&self, kind: ListKind) {
        self.lock().drop_kind(kind);
    }

    fn changed_all(&self) {
        for kind in [ListKind::Tools, ListKind::Prompts, ListKind::Resources] {
            self.changed(kind);
        }
    }

    fn session_ended(&self, at: usize) {
        let mut inner = self.lock();
        inner.watched.remove(&at);
        inner.pages.retain(|_, page| page.session != at);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves plain data behind: keep using it.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What is stored of a fetched page.
pub struct PageParts {
    /// The upstream's result.
    pub result: Arc<Value>,
    /// The upstream's identity.
    pub server_info: Arc<Value>,
    /// From [`ListCache::watch_for`].
    pub watch: Watch,
}

fn address(session: &Arc<UpstreamSession>) -> usize {
    Arc::as_ptr(session) as usize
}
