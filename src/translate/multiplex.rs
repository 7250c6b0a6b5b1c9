//! Many callers on one upstream session, the pure part: how a request's
//! `progressToken` is rewritten to its upstream id and restored, how a listen's
//! notifications are retagged with the caller's id, which caller a notification
//! from the upstream is for, and what eragate answers a server→client request
//! no caller can take. Never looks anything up: the session holds the table.

use serde_json::{Value, json};

use crate::protocol::envelope::SUBSCRIPTION_ID;
use crate::protocol::{ErrorCode, ErrorObject, LazyJson, Notification, Request, Response};

/// Who a notification from the upstream is for, by the protocol's rules alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Addressee {
    /// `notifications/progress`: the request whose upstream id is the token
    /// (`None`: no token eragate gave out; nobody asked for it).
    Progress(Option<u64>),
    /// Tagged with a listen's subscription id (the listen's upstream id): that
    /// listen while it is in flight, else as the scope says.
    Listen(u64, Scope),
    /// Carries no id of a request.
    Untagged(Scope),
}

/// How far an untagged notification reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// About the session (a cancelled server→client request, a list change, a
    /// resource update): for every listener, never the request in flight.
    Session,
    /// About the request whose stream carried it (or the only one in flight);
    /// for every listener when there is none.
    Request,
}

/// Where `notification` goes.
pub(crate) fn addressee(notification: &Notification) -> Addressee {
    if notification.method == "notifications/progress" {
        return Addressee::Progress(progress_token(notification));
    }
    let scope = if is_session_wide(&notification.method) {
        Scope::Session
    } else {
        Scope::Request
    };
    match subscription_of(notification) {
        Some(listen) => Addressee::Listen(listen, scope),
        None => Addressee::Untagged(scope),
    }
}

/// Replaces `params._meta.progressToken` with the upstream id, returning the
/// original (to give back with [`restore_progress_token`]).
pub(crate) fn rewrite_progress_token(params: &mut Option<LazyJson>, upstream_id: u64) -> Option<Value> {
    // Read first: most requests carry no token, and changing the tree gives up their text.
    params.as_ref()?.meta_member("progressToken")?;
    let meta = params
        .as_deref_mut()?
        .as_object_mut()?
        .get_mut("_meta")?
        .as_object_mut()?;
    let original = meta.get("progressToken")?.clone();
    meta.insert("progressToken".into(), Value::from(upstream_id));
    Some(original)
}

/// Gives a progress notification back the caller's own token.
pub(crate) fn restore_progress_token(notification: &mut Notification, original: &Value) {
    if let Some(params) = notification.params.as_deref_mut().and_then(Value::as_object_mut) {
        params.insert("progressToken".into(), original.clone());
    }
}

/// Replaces a notification's subscription id (the upstream id) with the caller's listen id.
pub(crate) fn retag_subscription(notification: &mut Notification, listen_id: Value) {
    let meta = notification
        .params
        .as_deref_mut()
        .and_then(|p| p.get_mut("_meta"))
        .and_then(Value::as_object_mut);
    if let Some(meta) = meta {
        meta.insert(SUBSCRIPTION_ID.into(), listen_id);
    }
}

/// The answer eragate gives for a server→client request no client can take:
/// `decline` for elicitation (a valid user choice), an error for the rest.
pub(crate) fn refuse_server_request(request: &Request) -> Response {
    if request.method == "elicitation/create" {
        return Response::result(request.id.clone(), json!({"action": "decline"}));
    }
    Response::error(
        Some(request.id.clone()),
        ErrorObject::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("{} cannot be relayed to this client", request.method),
        ),
    )
}

/// A progress notification's token, when it is one eragate gave out (a number).
fn progress_token(notification: &Notification) -> Option<u64> {
    notification.params.as_ref()?.get("progressToken")?.as_u64()
}

/// The upstream id of the listen a notification is tagged with (`_meta` subscription id).
fn subscription_of(notification: &Notification) -> Option<u64> {
    notification
        .params
        .as_ref()?
        .get("_meta")?
        .get(SUBSCRIPTION_ID)?
        .as_u64()
}

fn is_session_wide(method: &str) -> bool {
    method == "notifications/cancelled"
        || method == "notifications/resources/updated"
        || method.ends_with("/list_changed")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::Id;
    use crate::protocol::jsonrpc::Outcome;

    fn notification(method: &str, params: Value) -> Notification {
        Notification {
            method: method.into(),
            params: Some(params.into()),
        }
    }

    #[test]
    fn addressee_table() {
        let cases = [
            (
                notification("notifications/progress", json!({"progressToken": 42, "progress": 1})),
                Addressee::Progress(Some(42)),
            ),
            // A token eragate never gave out (it only hands out numbers).
            (
                notification("notifications/progress", json!({"progressToken": "t", "progress": 1})),
                Addressee::Progress(None),
            ),
            (
                notification("notifications/progress", json!({"progress": 1})),
                Addressee::Progress(None),
            ),
            (
                notification("notifications/message", json!({"level": "info", "data": "x"})),
                Addressee::Untagged(Scope::Request),
            ),
            (
                notification("notifications/cancelled", json!({"requestId": 3})),
                Addressee::Untagged(Scope::Session),
            ),
            (
                notification("notifications/tools/list_changed", json!({})),
                Addressee::Untagged(Scope::Session),
            ),
            (
                notification("notifications/resources/updated", json!({"uri": "x://a"})),
                Addressee::Untagged(Scope::Session),
            ),
            (
                notification(
                    "notifications/resources/updated",
                    json!({"uri": "x://a", "_meta": {SUBSCRIPTION_ID: 7}}),
                ),
                Addressee::Listen(7, Scope::Session),
            ),
            (
                notification("notifications/message", json!({"_meta": {SUBSCRIPTION_ID: 7}})),
                Addressee::Listen(7, Scope::Request),
            ),
            // A subscription id that is no upstream id of ours.
            (
                notification(
                    "notifications/prompts/list_changed",
                    json!({"_meta": {SUBSCRIPTION_ID: "other"}}),
                ),
                Addressee::Untagged(Scope::Session),
            ),
        ];
        for (notification, expected) in cases {
            assert_eq!(addressee(&notification), expected, "{notification:?}");
        }
    }

    #[test]
    fn progress_tokens_become_the_upstream_id() {
        let mut params = Some(LazyJson::from(
            json!({"_meta": {"progressToken": "client-7"}, "name": "x"}),
        ));
        assert_eq!(rewrite_progress_token(&mut params, 42), Some(json!("client-7")));
        assert_eq!(
            params.as_deref(),
            Some(&json!({"_meta": {"progressToken": 42}, "name": "x"}))
        );
        let cases = [
            Some(json!({"name": "x"})),
            Some(json!({"_meta": {}, "name": "x"})),
            Some(json!({"_meta": "not an object"})),
            Some(json!([1, 2])),
            None,
        ];
        for case in cases {
            let mut params = case.clone().map(LazyJson::from);
            assert_eq!(rewrite_progress_token(&mut params, 1), None, "{case:?}");
            assert_eq!(params.as_deref(), case.as_ref(), "untouched");
        }
    }

    #[test]
    fn listen_notifications_name_their_listen_and_get_the_callers_id() {
        let mut updated = notification(
            "notifications/resources/updated",
            json!({"uri": "x://a", "_meta": {SUBSCRIPTION_ID: 42}}),
        );
        assert_eq!(addressee(&updated), Addressee::Listen(42, Scope::Session));
        retag_subscription(&mut updated, json!("listen-1"));
        assert_eq!(
            updated.params.as_deref(),
            Some(&json!({"uri": "x://a", "_meta": {SUBSCRIPTION_ID: "listen-1"}}))
        );
        let mut untagged = notification("notifications/resources/updated", json!({"uri": "x://a"}));
        retag_subscription(&mut untagged, json!("listen-1"));
        assert_eq!(
            untagged.params.as_deref(),
            Some(&json!({"uri": "x://a"})),
            "no _meta, no tag"
        );
    }

    #[test]
    fn refusals_decline_elicitation_and_error_the_rest() {
        let elicit = Request {
            id: Id::number(3),
            method: "elicitation/create".into(),
            params: None,
        };
        assert_eq!(
            refuse_server_request(&elicit).outcome,
            Outcome::Result(json!({"action": "decline"}).into())
        );
        let sample = Request {
            id: Id::number(4),
            method: "sampling/createMessage".into(),
            params: None,
        };
        assert!(
            matches!(refuse_server_request(&sample).outcome, Outcome::Error(e) if e.code == ErrorCode::METHOD_NOT_FOUND)
        );
    }

    fn token() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            ".{0,16}".prop_map(Value::from),
        ]
    }

    proptest! {
        /// Rewriting a request's token and restoring it on the progress the upstream
        /// sends with the rewritten one gives the caller exactly its own token.
        #[test]
        fn progress_token_rewrite_then_restore_is_identity(original in token(), upstream_id in 0u64..(1 << 53)) {
            let mut params = Some(LazyJson::from(json!({"_meta": {"progressToken": original.clone()}, "name": "x"})));
            let kept = rewrite_progress_token(&mut params, upstream_id);
            prop_assert_eq!(kept.as_ref(), Some(&original));
            let sent = params.as_ref().and_then(|p| p["_meta"].get("progressToken")).cloned();
            let mut progress = notification(
                "notifications/progress",
                json!({"progressToken": sent, "progress": 1}),
            );
            prop_assert_eq!(addressee(&progress), Addressee::Progress(Some(upstream_id)));
            if let Some(kept) = &kept {
                restore_progress_token(&mut progress, kept);
            }
            prop_assert_eq!(progress.params.as_deref(), Some(&json!({"progressToken": original, "progress": 1})));
        }
    }
}
