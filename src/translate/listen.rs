//! `subscriptions/listen` ⇄ the legacy notification stream and
//! `resources/subscribe`, the pure part: what a legacy upstream can honour of
//! a listen filter, which notifications match it, and their tagging.

use serde_json::{Map, Value, json};

use crate::protocol::envelope::SUBSCRIPTION_ID;
use crate::protocol::{Id, Message, Notification, Response};

/// The part of a listen filter eragate will honour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    /// `toolsListChanged`
    pub(crate) tools: bool,
    /// `promptsListChanged`
    pub(crate) prompts: bool,
    /// `resourcesListChanged`
    pub(crate) resources: bool,
    /// `resourceSubscriptions`
    pub(crate) uris: Vec<String>,
}

impl Filter {
    /// What of `wanted` (a listen's `notifications`) a legacy upstream with
    /// `capabilities` can notify: list changes it advertises, and resource
    /// subscriptions when it supports `resources/subscribe`.
    pub(crate) fn honoured(wanted: &Value, capabilities: &Value) -> Filter {
        let asked = |flag: &str| wanted.get(flag).and_then(Value::as_bool) == Some(true);
        let offers = |kind: &str, flag: &str| {
            capabilities
                .get(kind)
                .and_then(|c| c.get(flag))
                .and_then(Value::as_bool)
                == Some(true)
        };
        let uris = if offers("resources", "subscribe") {
            wanted
                .get("resourceSubscriptions")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        Filter {
            tools: asked("toolsListChanged") && offers("tools", "listChanged"),
            prompts: asked("promptsListChanged") && offers("prompts", "listChanged"),
            resources: asked("resourcesListChanged") && offers("resources", "listChanged"),
            uris,
        }
    }

    /// The filter as the acknowledgement's `notifications`.
    pub(crate) fn to_value(&self) -> Value {
        let mut object = Map::new();
        for (flag, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                object.insert(flag.into(), Value::Bool(true));
            }
        }
        if !self.uris.is_empty() {
            object.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        Value::Object(object)
    }

    /// Whether a notification from the upstream belongs on this listen.
    pub(crate) fn wants(&self, notification: &Notification) -> bool {
        match notification.method.as_str() {
            "notifications/tools/list_changed" => self.tools,
            "notifications/prompts/list_changed" => self.prompts,
            "notifications/resources/list_changed" => self.resources,
            "notifications/resources/updated" => {
                let uri = notification
                    .params
                    .as_ref()
                    .and_then(|p| p.get("uri"))
                    .and_then(Value::as_str);
                uri.is_some_and(|u| self.uris.iter().any(|s| s == u))
            }
            _ => false,
        }
    }
}

/// `notification` tagged with the listen's id (`_meta[subscriptionId]`).
pub(crate) fn tagged(method: &str, params: Option<Value>, listen_id: &Value) -> Message {
    let mut params = params.unwrap_or_else(|| json!({}));
    if let Some(object) = params.as_object_mut() {
        let meta = object.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(SUBSCRIPTION_ID.into(), listen_id.clone());
        }
    }
    Message::Notification(Notification {
        method: method.into(),
        params: Some(params.into()),
    })
}

/// A listen notification as a legacy client receives it: without the tag.
pub(crate) fn untagged(mut notification: Notification) -> Notification {
    if let Some(params) = notification.params.as_deref_mut().and_then(Value::as_object_mut) {
        let now_empty = match params.get_mut("_meta").and_then(Value::as_object_mut) {
            Some(meta) => {
                meta.remove(SUBSCRIPTION_ID);
                meta.is_empty()
            }
            None => false,
        };
        if now_empty {
            params.remove("_meta");
        }
    }
    notification
}

/// The acknowledgement that opens a listen stream.
pub(crate) fn acknowledgement(filter: &Filter, listen_id: &Value) -> Message {
    tagged(
        "notifications/subscriptions/acknowledged",
        Some(json!({"notifications": filter.to_value()})),
        listen_id,
    )
}

/// The result that ends a listen gracefully.
pub(crate) fn listen_result(id: &Id) -> Message {
    let mut meta = Map::new();
    meta.insert(SUBSCRIPTION_ID.into(), id.to_value());
    Response::result(id.clone(), json!({"resultType": "complete", "_meta": meta})).into_message()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notification(method: &str, params: Value) -> Notification {
        Notification {
            method: method.into(),
            params: Some(params.into()),
        }
    }

    #[test]
    fn a_legacy_upstream_honours_what_it_advertises() {
        let wanted =
            json!({"toolsListChanged": true, "promptsListChanged": true, "resourceSubscriptions": ["x://a", "x://b"]});
        let both = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}});
        let filter = Filter::honoured(&wanted, &both);
        assert_eq!(
            filter.to_value(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["x://a", "x://b"]})
        );
        let no_subscribe = Filter::honoured(&wanted, &json!({"tools": {"listChanged": true}, "resources": {}}));
        assert_eq!(no_subscribe.to_value(), json!({"toolsListChanged": true}));
    }

    #[test]
    fn only_matching_notifications_pass() {
        let filter = Filter {
            tools: true,
            uris: vec!["x://a".into()],
            ..Filter::default()
        };
        assert!(filter.wants(&notification("notifications/tools/list_changed", json!({}))));
        assert!(!filter.wants(&notification("notifications/prompts/list_changed", json!({}))));
        assert!(filter.wants(&notification(
            "notifications/resources/updated",
            json!({"uri": "x://a"})
        )));
        assert!(!filter.wants(&notification(
            "notifications/resources/updated",
            json!({"uri": "x://b"})
        )));
        assert!(!filter.wants(&notification("notifications/message", json!({}))));
    }

    #[test]
    fn tags_come_and_go() {
        let Message::Notification(n) = tagged(
            "notifications/resources/updated",
            Some(json!({"uri": "x://a"})),
            &json!(7),
        ) else {
            panic!("a notification");
        };
        assert_eq!(
            n.params.as_deref(),
            Some(&json!({"uri": "x://a", "_meta": {SUBSCRIPTION_ID: 7}}))
        );
        assert_eq!(untagged(n).params.as_deref(), Some(&json!({"uri": "x://a"})));
    }
}
