//! What eragate does for a federation outside any client's request: it
//! watches every member for list changes (a listen of its own per member), and
//! under `prefix_mode = "never"` it checks before serving that no two members
//! share a name.

use std::sync::{Arc, Weak};

use serde_json::{Value, json};

use tokio_util::sync::CancellationToken;

use super::Asking;
use super::listens::{list_changed_method, listen_unprompted};
use super::lists::Need;
use crate::auth::Principal;
use crate::bridge::listen::ReopenPause;
use crate::bridge::param_headers::SentParams;
use crate::bridge::reply::Reply;
use crate::bridge::sessions::stateless_envelope;
use crate::federate::names::PrefixMode;
use crate::federate::route::NameKind;
use crate::gateway::Gateway;
use crate::protocol::{Id, Message};
use crate::router::Backend;
use crate::router::federation::Federation;

/// Listens to every member of every federation for list changes while the
/// gateway lives: a member's `list_changed` drops the names learned from it
/// and reaches the federation's legacy clients on their GET streams. A listen
/// that ends is opened again after a pause (doubling up to a minute); the
/// watch ends with the gateway, or when its federation is no longer routed.
pub(crate) fn spawn_watchers(gateway: &Arc<Gateway>) {
    for (_, backend) in gateway.router().routes() {
        spawn_watcher(gateway, &backend);
    }
}

/// [`spawn_watchers`] for one backend (nothing unless it is a federation):
/// for a federation a reload started.
pub(crate) fn spawn_watcher(gateway: &Arc<Gateway>, backend: &Backend) {
    let Some(federation) = backend.federation() else {
        return;
    };
    for member in 0..federation.members().len() {
        let watch = watch_member(
            Arc::downgrade(gateway),
            gateway.closing().clone(),
            federation.clone(),
            member,
        );
        tokio::spawn(watch);
    }
}

async fn watch_member(gateway: Weak<Gateway>, closing: CancellationToken, federation: Arc<Federation>, member: usize) {
    let envelope = stateless_envelope(&json!({}), &Value::Null);
    let principal = Principal::anonymous();
    let every_list = json!({"notifications": {
        "toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true}});
    let mut pause = ReopenPause::default();
    loop {
        let asked = listen_unprompted(
            &gateway,
            &federation,
            member,
            Id::number(0),
            every_list.clone(),
            &envelope,
            &principal,
        );
        let Some(reply) = asked.await else { return };
        if let Reply::Stream(mut responses, _) = reply {
            loop {
                let message = tokio::select! {
                    () = closing.cancelled() => return,
                    message = responses.recv() => message,
                };
                match message {
                    Some(Message::Notification(n)) if n.method.ends_with("/list_changed") => {
                        federation.list_changed(list_changed_method(&n.method));
                        pause.reset();
                    }
                    Some(Message::Notification(_)) => pause.reset(),
                    _ => break,
                }
            }
        }
        tokio::select! {
            () = closing.cancelled() => return,
            () = tokio::time::sleep(pause.take()) => {}
        }
    }
}

/// The names two members of a `never` federation share, by the federation's
/// path: every member's tools and prompts listed in full (as the anonymous
/// principal); a member that cannot be reached is left out. `eragate run`
/// refuses to start on any, and `check-config` reports them.
pub(crate) async fn never_collisions(gateway: &Gateway) -> Vec<(String, String)> {
    let mut routes: Vec<_> = gateway.router().routes().collect();
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
            sent: SentParams::NoHeaders,
        };
        for kind in [NameKind::Tools, NameKind::Prompts] {
            if let Err(error) = asking.names(kind, Need::Fresh).await {
                found.push((path.clone(), error.message));
            }
        }
    }
    found
}
