//! A handshake-era client's `resources/subscribe` and `resources/unsubscribe`
//! on a federated path. The session keeps its set of exposed URIs (bounded,
//! as on a single upstream's path); every change reopens one listen joined
//! across the members owning them, asking only `resourceSubscriptions` (list
//! changes reach the GET stream through the federation's watch, not twice),
//! and the members' `notifications/resources/updated` reach the client's GET
//! stream with the exposed URI and without the listen's tag. An empty set
//! closes the listen; so does the session's end.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{Asking, error_reply};
use crate::bridge::modern::ListenCounting;
use crate::bridge::reply::Reply;
use crate::bridge::sessions::ClientSession;
use crate::federate::names::restore_uri;
use crate::protocol::{ErrorCode, ErrorObject, Id, Message, Request};
use crate::translate::listen;

/// Answers a legacy `session`'s `resources/subscribe` or
/// `resources/unsubscribe`: an exposed URI no member owns is not found; a
/// subscription its owner does not take is refused (and not kept).
pub(crate) async fn change(asking: &Asking<'_>, session: &Arc<ClientSession>, request: Request) -> Reply {
    let Some(uri) = request.param_str("uri") else {
        let error = ErrorObject::invalid_params("Invalid params: uri must be a string");
        return error_reply(request.id, error);
    };
    let Some((owner, _)) = restore_uri(asking.prefixes(), uri) else {
        let message = format!(
            "Unknown resource: {uri:?} is no member's of this federation (members: {})",
            asking.member_names()
        );
        return error_reply(request.id, ErrorObject::new(ErrorCode::RESOURCE_NOT_FOUND, message));
    };
    let subscribe = request.method == "resources/subscribe";
    let uris = match session.change_subscriptions(uri, subscribe) {
        Ok(uris) => uris,
        Err(full) => return error_reply(request.id, full.error()),
    };
    let honoured = reopen(asking, session, &uris).await;
    if subscribe && !honoured.iter().any(|h| h == uri) {
        // Not kept: the next change's listen does not ask for it again.
        let _ = session.change_subscriptions(uri, false);
        let member = asking.federation.members().get(owner).map_or("", |m| m.pool.name());
        let message = format!(
            "Cannot subscribe to {uri:?}: its member {member} did not take the subscription \
             (it offers no resources/subscribe, or could not be reached)"
        );
        return error_reply(request.id, ErrorObject::internal(message));
    }
    Reply::result(request.id, json!({}))
}

/// (Re)opens `session`'s listen for `uris` across their owners, unless a later
/// change made the set another; the exposed URIs the owners took.
async fn reopen(asking: &Asking<'_>, session: &Arc<ClientSession>, uris: &BTreeSet<String>) -> Vec<String> {
    if uris.is_empty() {
        session.replace_listen_for(uris, None);
        return Vec::new();
    }
    let owners: BTreeSet<usize> = uris
        .iter()
        .filter_map(|uri| restore_uri(asking.prefixes(), uri))
        .map(|(member, _)| member)
        .collect();
    let wanted = json!({ "resourceSubscriptions": uris });
    let reply = asking
        // Bounded by its session (one listen each, of at most 256 URIs), as on a
        // single upstream's path: not one of the principal's listens.
        .joined_listen(
            Id::number(0),
            &wanted,
            |member| owners.contains(&member),
            ListenCounting::CountedElsewhere,
        )
        .await;
    let Reply::Stream(mut notifications, _) = reply else {
        // No owner could open a listen: the previous one asked for another set.
        session.replace_listen_for(uris, None);
        return Vec::new();
    };
    let honoured = match notifications.try_recv() {
        Ok(Message::Notification(ack)) => acknowledged_uris(ack.params.as_deref()),
        _ => Vec::new(),
    };
    let client = Arc::downgrade(session);
    let task = tokio::spawn(async move {
        while let Some(message) = notifications.recv().await {
            let Message::Notification(notification) = message else {
                return;
            };
            if notification.method.ends_with("/list_changed") {
                continue; // the federation's watch brings those to the GET stream
            }
            let Some(client) = client.upgrade() else { return };
            client.push(Message::Notification(listen::untagged(notification)));
        }
    });
    session.replace_listen_for(uris, Some(task.abort_handle()));
    honoured
}

/// The (exposed) `resourceSubscriptions` a joined listen's acknowledgement honours.
fn acknowledged_uris(params: Option<&Value>) -> Vec<String> {
    params
        .and_then(|p| p.get("notifications"))
        .and_then(|n| n.get("resourceSubscriptions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acknowledgement_names_the_uris_it_honours() {
        let ack = json!({"notifications": {"resourceSubscriptions": ["a+x://1", "b+y://2"]}});
        assert_eq!(acknowledged_uris(Some(&ack)), ["a+x://1", "b+y://2"]);
        let none = json!({"notifications": {"toolsListChanged": true}});
        assert!(acknowledged_uris(Some(&none)).is_empty());
        assert!(acknowledged_uris(None).is_empty());
    }
}
