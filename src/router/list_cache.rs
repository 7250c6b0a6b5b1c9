//! The lists eragate keeps for one backend: pages of `tools/list`,
//! `prompts/list`, `resources/list` and `resources/templates/list` per
//! partition (principal, capability profile) and cursor, as the upstream
//! answered them. A page is kept only while eragate can tell it is current:
//! the upstream announces list changes on the sessions it listens to
//! ([`ListCache::watch`]), or the page is re-listed once older than the
//! configured interval. Bounded by entry count; never shared across principals.
//! The caching hints the pages get are decided in [`crate::translate::cache`].
//! Next to the pages: the `resources/read` results a modern upstream lets
//! eragate keep ([`ListCache::reads`], [`super::read_cache`]).

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
pub(crate) enum ListKind {
    /// `tools/list`.
    Tools,
    /// `prompts/list`.
    Prompts,
    /// `resources/list` and `resources/templates/list` (one notification covers both).
    Resources,
}

impl ListKind {
    /// The kind of a list method; `None` for any other method.
    pub(crate) fn of(method: ModernMethod) -> Option<ListKind> {
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
pub(crate) struct PageKey {
    /// Who asked.
    pub(crate) principal: String,
    /// With which capabilities (canonical JSON).
    pub(crate) profile: String,
    /// The list method.
    pub(crate) method: ModernMethod,
    /// The cursor asked for (`None`: the first page).
    pub(crate) cursor: Option<String>,
}

/// A kept page.
#[derive(Clone, Debug)]
pub(crate) struct Page {
    /// The upstream's result, untranslated.
    pub(crate) result: Arc<Value>,
    /// The upstream's identity (for a modern client's `_meta`).
    pub(crate) server_info: Arc<Value>,
    /// How eragate learns that it changed.
    pub(crate) watch: Watch,
    fetched: Instant,
    digest: u64,
    /// The session it came from (its address), whose end ends the page.
    session: usize,
}

/// Taken before a page is fetched: a change announced while it was in flight
/// keeps it from being stored.
#[must_use]
pub(crate) struct Ticket {
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
pub(crate) struct ListCache {
    relist: Option<Duration>,
    max_entries: usize,
    inner: Mutex<Inner>,
    reads: super::read_cache::ReadCache,
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
    pub(crate) fn new(config: &CacheConfig) -> ListCache {
        ListCache {
            relist: config.relist_interval(),
            max_entries: config.max_entries(),
            inner: Mutex::new(Inner::default()),
            reads: super::read_cache::ReadCache::new(config.max_entries()),
        }
    }

    /// The `resources/read` results kept for the backend (bounded like the pages).
    pub(crate) fn reads(&self) -> &super::read_cache::ReadCache {
        &self.reads
    }

    /// The page `key`, if it is kept and still current at `now`.
    pub(crate) fn lookup(&self, key: &PageKey, now: Instant) -> Option<Page> {
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
    pub(crate) fn ticket(&self, kind: ListKind) -> Ticket {
        Ticket {
            kind,
            generation: self.lock().generations[kind.index()],
        }
    }

    /// How a page of `kind` fetched on `session` would be known to change:
    /// announced, if the upstream said it announces such changes and eragate
    /// listens on the session; else re-listed, if an interval is configured.
    pub(crate) fn watch_for(&self, kind: ListKind, session: &Arc<UpstreamSession>) -> Watch {
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
    pub(crate) fn store(
        &self,
        key: PageKey,
        ticket: Ticket,
        page: PageParts,
        session: &Arc<UpstreamSession>,
        now: Instant,
    ) {
        self.store_from(key, ticket, page, address(session), now);
    }

    fn store_from(&self, key: PageKey, ticket: Ticket, page: PageParts, session: usize, now: Instant) {
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
            session,
        };
        inner.pages.insert(key, page);
    }

    /// Who the page `key` may differ for, as far as eragate has seen:
    /// `per_principal` when the upstream is reached with each principal's own
    /// credential or the gateway filters lists per caller.
    pub(crate) fn audience(&self, key: &PageKey, per_principal: bool) -> Audience {
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
    pub(crate) fn watch(self: &Arc<Self>, session: &Arc<UpstreamSession>) {
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

    /// How many pages are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().pages.len()
    }

    /// Whether no page is kept.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
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
pub(crate) struct PageParts {
    /// The upstream's result.
    pub(crate) result: Arc<Value>,
    /// The upstream's identity.
    pub(crate) server_info: Arc<Value>,
    /// From [`ListCache::watch_for`].
    pub(crate) watch: Watch,
}

fn address(session: &Arc<UpstreamSession>) -> usize {
    Arc::as_ptr(session) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(principal: &str, method: ModernMethod, cursor: Option<&str>) -> PageKey {
        PageKey {
            principal: principal.into(),
            profile: "{}".into(),
            method,
            cursor: cursor.map(str::to_owned),
        }
    }

    fn parts(tools: &[&str], watch: Watch) -> PageParts {
        let tools: Vec<Value> = tools.iter().map(|n| json!({"name": n})).collect();
        PageParts {
            result: Arc::new(json!({ "tools": tools })),
            server_info: Arc::new(json!({"name": "s"})),
            watch,
        }
    }

    fn cache(relist: Option<&str>, max_entries: usize) -> ListCache {
        let toml = match relist {
            Some(every) => format!("relist_interval = \"{every}\"\nmax_entries = {max_entries}"),
            None => format!("max_entries = {max_entries}"),
        };
        ListCache::new(&toml::from_str(&toml).unwrap())
    }

    const TOOLS: ModernMethod = ModernMethod::ToolsList;

    #[test]
    fn kept_while_current() {
        let t0 = Instant::now();
        let later = |s: u64| t0 + Duration::from_secs(s);
        let lists = cache(Some("10s"), 10);
        let alice = key("alice", TOOLS, None);
        // A page nobody watches is never kept.
        lists.store_from(
            alice.clone(),
            lists.ticket(ListKind::Tools),
            parts(&["a"], Watch::Blind),
            1,
            t0,
        );
        assert!(lists.lookup(&alice, t0).is_none());
        // Re-listed every 10 s: kept 10 s, its ttl what is left.
        lists.store_from(
            alice.clone(),
            lists.ticket(ListKind::Tools),
            parts(&["a"], Watch::Relisted(10_000)),
            1,
            t0,
        );
        assert_eq!(
            lists.lookup(&alice, later(4)).map(|p| p.watch),
            Some(Watch::Relisted(6_000))
        );
        assert!(
            lists.lookup(&alice, later(10)).is_none(),
            "past the interval: listed again"
        );
        // Announced: kept until a change of its kind.
        let prompts = key("alice", ModernMethod::PromptsList, None);
        lists.store_from(
            alice.clone(),
            lists.ticket(ListKind::Tools),
            parts(&["a"], Watch::Notified),
            1,
            t0,
        );
        lists.store_from(
            prompts.clone(),
            lists.ticket(ListKind::Prompts),
            parts(&[], Watch::Notified),
            1,
            t0,
        );
        assert!(lists.lookup(&alice, later(3600)).is_some());
        lists.changed(ListKind::Tools);
        assert!(lists.lookup(&alice, t0).is_none(), "a tools change drops tools pages");
        assert!(lists.lookup(&prompts, t0).is_some(), "and no other");
        // A change while a page was in flight: it is not kept.
        let ticket = lists.ticket(ListKind::Tools);
        lists.changed(ListKind::Tools);
        lists.store_from(alice.clone(), ticket, parts(&["a"], Watch::Notified), 1, t0);
        assert!(lists.lookup(&alice, t0).is_none());
        // The session's end drops what came from it.
        lists.session_ended(1);
        assert!(lists.lookup(&prompts, t0).is_none());
    }

    #[test]
    fn a_relist_that_finds_a_change_drops_the_other_pages() {
        let t0 = Instant::now();
        let lists = cache(Some("1s"), 10);
        let (alice, bob) = (key("alice", TOOLS, None), key("bob", TOOLS, None));
        let relisted = Watch::Relisted(1_000);
        lists.store_from(
            alice.clone(),
            lists.ticket(ListKind::Tools),
            parts(&["a"], relisted),
            1,
            t0,
        );
        lists.store_from(
            bob.clone(),
            lists.ticket(ListKind::Tools),
            parts(&["a"], relisted),
            2,
            t0,
        );
        let later = t0 + Duration::from_millis(1500);
        lists.store_from(
            alice.clone(),
            lists.ticket(ListKind::Tools),
            parts(&["a", "b"], relisted),
            1,
            later,
        );
        assert!(lists.lookup(&alice, later).is_some());
        assert!(lists.lookup(&bob, later).is_none(), "bob's copy is known to be old");
    }

    #[test]
    fn audience_and_bounds() {
        let t0 = Instant::now();
        let lists = cache(None, 2);
        let notified = Watch::Notified;
        let store = |k: &PageKey, tools: &[&str]| {
            lists.store_from(k.clone(), lists.ticket(ListKind::Tools), parts(tools, notified), 1, t0);
        };
        let (alice, bob, carol) = (
            key("alice", TOOLS, None),
            key("bob", TOOLS, None),
            key("carol", TOOLS, None),
        );
        assert_eq!(lists.audience(&alice, false), Audience::Unproven, "nothing seen");
        store(&alice, &["a"]);
        assert_eq!(
            lists.audience(&alice, false),
            Audience::Unproven,
            "one principal proves nothing"
        );
        store(&bob, &["a"]);
        assert_eq!(lists.audience(&alice, false), Audience::Anyone, "two got the same");
        assert_eq!(
            lists.audience(&alice, true),
            Audience::PerCaller,
            "per-principal credentials or filtering"
        );
        store(&carol, &["a", "secret"]);
        assert_eq!(
            lists.audience(&alice, false),
            Audience::PerCaller,
            "two got different lists"
        );
        assert_eq!(lists.len(), 2, "bounded: the oldest page went");
        let anonymous = cache(None, 2);
        let nobody = key("", TOOLS, None);
        anonymous.store_from(
            nobody.clone(),
            anonymous.ticket(ListKind::Tools),
            parts(&["a"], notified),
            1,
            t0,
        );
        assert_eq!(
            anonymous.audience(&nobody, false),
            Audience::Anyone,
            "without authentication"
        );
        let none = cache(None, 0);
        none.store_from(
            alice.clone(),
            none.ticket(ListKind::Tools),
            parts(&["a"], notified),
            1,
            t0,
        );
        assert!(none.is_empty(), "max_entries = 0 keeps nothing");
    }
}
