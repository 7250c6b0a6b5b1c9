//! What eragate does for a federation outside any client's request: it
//! watches every member for list changes (a listen of its own per member), and
//! under `prefix_mode = "never"` it checks before serving that no two members
//! share a name.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Asking, list_changed_method};
use crate::auth::Principal;
use crate::bridge::Gateway;
use crate::bridge::reply::Reply;
use crate::bridge::sessions::stateless_envelope;
use crate::federate::names::PrefixMode;
use crate::federate::route::NameKind;
use crate::protocol::{Id, Message, ModernMethod};
use crate::router::Backend;
use crate::router::federation::Federation;

/// The first pause before a member's watch listen is opened again.
const WATCH_PAUSE: Duration = Duration::from_secs(1);

/// The longest such pause.
const WATCH_PAUSE_MAX: Duration = Duration::from_secs(60);

/// Listens to every member of every federation for list changes while the
/// gateway lives: a member's `list_changed` drops the names learned from it
/// and reaches the federation's legacy clients on their GET streams. A listen
/// that ends is opened again after a pause (doubling up to a minute); the
/// watch ends with the gateway, or when its federation is no longer routed.
pub fn spawn_watchers(gateway: &Arc<Gateway>) {
    for (_, backend) in gateway.router.routes() {
        spawn_watcher(gateway, &backend);
    }
}

/// [`spawn_watchers`] for one backend (nothing unless it is a federation):
/// for a federation a reload started.
pub fn spawn_watcher(gateway: &Arc<Gateway>, backend: &Backend) {
    let Some(federation) = backend.federation() else {
        return;
    };
    let path = federation.config().path.clone();
    for member in 0..federation.members().len() {
        let watch = watch_member(Arc::downgrade(gateway), path.clone(), federation.clone(), member);
        tokio::spawn(watch);
    }
}

async fn watch_member(gateway: Weak<Gateway>, path: String, federation: Arc<Federation>, member: usize) {
    let mut pause = WATCH_PAUSE;
    loop {
        let Some(strong) = gateway.upgrade() else { return };
        let routed = strong.router.route(&path);
        if routed
            .as_ref()
            .and_then(Backend::federation)
            .is_none_or(|f| !Arc::ptr_eq(f, &federation))
        {
            return;
        }
        let closing = strong.closing.clone();
        let envelope = stateless_envelope(&json!({}), &Value::Null);
        let principal = Principal::anonymous();
        let asking = Asking {
            gateway: &strong,
            federation: &federation,
            prefixes: federation.prefixes(),
            envelope: &envelope,
            client: None,
            principal: &principal,
            session: None,
        };
        let every_list = json!({"notifications": {
            "toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true}});
        let reply = asking
            .ask(
                member,
                Id::number(0),
                ModernMethod::SubscriptionsListen,
                Some(every_list),
            )
            .await;
        drop(strong);
        if let Reply::Stream(mut responses, _) = reply {
            loop {
                let message = tokio::select! {
                    _ = closing.cancelled() => return,
                    message = responses.recv() => message,
                };
                match message {
                    Some(Message::Notification(n)) if n.method.ends_with("/list_changed") => {
                        federation.list_changed(list_changed_method(&n.method));
                        pause = WATCH_PAUSE;
                    }
                    Some(Message::Notification(_)) => pause = WATCH_PAUSE,
                    _ => break,
                }
            }
        }
        tokio::select! {
            _ = closing.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(WATCH_PAUSE_MAX);
    }
}

/// The names two members of a `never` federation share, by the federation's
/// path: every member's tools and prompts listed in full (as the anonymous
/// principal); a member that cannot be reached is left out. `eragate run`
/// refuses to start on any, and `check-config` reports them.
pub async fn never_collisions(gateway: &Gateway) -> Vec<(String, String)> {
    let mut routes: Vec<_> = gateway.router.routes().collect();
    routes.sort_by(|a, b| a.0.cmp(&b.0));
    let envelope = stateless_envelope(&json!({}), &Value::Null);
    let principal = Principal::anonymous();
    let mut found = Vec::new();
    for (path, backend) in routes {
        let Some(federation) = backend.federation().filter(|f| f.mode() == PrefixMode::Never) else {
            continue;
        };
        let asking = Asking {
            gateway,
            federation,
            prefixes: federation.prefixes(),
            envelope: &envelope,
            client: None,
            principal: &principal,
            session: None,
        };
        for kind in [NameKind::Tools, NameKind::Prompts] {
            if let Err(error) = asking.names(kind, true).await {
                found.push((path.clone(), error.message));
            }
        }
    }
    found
}
