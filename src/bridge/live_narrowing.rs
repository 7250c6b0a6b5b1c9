//! What a long-lived stream (a 2026-07-28 listen, a legacy session's GET
//! stream) may carry to one caller under `[[policies]]` as reloads leave them:
//! a `notifications/resources/updated` only for a resource the caller may see.
//! Kept apart from the request stage (`restrict`) so that a client session can
//! hold one without depending on replies.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::auth::Admitted;
use crate::config::Config;
use crate::policy::catalog::{self, Caller, Catalog, Selection};
use crate::protocol::Message;
use crate::router::Backend;

/// The `[[policies]]` one caller is served under on one path as a reload
/// leaves them: what a long-lived stream (a listen, a legacy session's GET
/// stream) checks each notification the server sends on its own against.
pub(crate) struct LiveNarrowing {
    applied: Arc<ArcSwap<Config>>,
    path: Box<str>,
    subject: Box<str>,
    scopes: Option<Arc<[String]>>,
}

impl LiveNarrowing {
    /// `caller` on `backend`'s path, under whatever policies apply when asked.
    pub(crate) fn of(applied: &Arc<ArcSwap<Config>>, backend: &Backend, caller: &Admitted) -> LiveNarrowing {
        LiveNarrowing {
            applied: Arc::clone(applied),
            path: backend.config().path.as_str().into(),
            subject: caller.principal.as_str().into(),
            scopes: caller.scopes.clone(),
        }
    }

    /// Whether `message`, sent by the server on its own, may reach the caller
    /// now (a `notifications/resources/updated` only for a resource it may see).
    pub(crate) fn shows(&self, message: &Message) -> bool {
        let Message::Notification(notification) = message else {
            return true;
        };
        let config = self.applied.load();
        if config.policies.is_empty() {
            return true;
        }
        let caller = Caller {
            subject: &self.subject,
            scopes: self.scopes.as_deref(),
        };
        let rules = match catalog::select(&config.policies, &config.groups, &self.path, caller) {
            Selection::Unrestricted => return true,
            Selection::Narrowed(entry) => entry.and_then(|i| config.policies.get(i)),
        };
        Catalog::new(rules).shows(&notification.method, notification.params.as_deref())
    }
}
