//! Server→client requests of a legacy upstream as 2026-07-28 multi round-trip
//! input (`input_required`), the pure part: which requests a client may be
//! asked, how they are keyed and shown, and what binds a `requestState`. The
//! conversation itself (gather, ask, answer, resume, expire) is [`conversation`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::protocol::{ErrorObject, LazyJson, Request, Revision};

pub mod conversation;

/// A kind of input a legacy server asks its client for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InputKind {
    /// `sampling/createMessage`
    Sampling,
    /// `elicitation/create` in form mode.
    FormElicitation,
    /// `elicitation/create` in URL mode (2025-11-25).
    UrlElicitation,
    /// `roots/list`
    Roots,
}

impl InputKind {
    /// The kind of a server→client request; `None` for anything else (e.g. `ping`).
    pub(crate) fn of(request: &Request) -> Option<InputKind> {
        match request.method.as_str() {
            "sampling/createMessage" => Some(InputKind::Sampling),
            "roots/list" => Some(InputKind::Roots),
            "elicitation/create" => {
                let mode = request
                    .params
                    .as_ref()
                    .and_then(|p| p.get("mode"))
                    .and_then(Value::as_str);
                Some(if mode == Some("url") {
                    InputKind::UrlElicitation
                } else {
                    InputKind::FormElicitation
                })
            }
            _ => None,
        }
    }

    /// Whether a client that declared `capabilities` may be asked for this kind.
    pub(crate) fn declared_by(self, capabilities: &Value) -> bool {
        let get = |key: &str| capabilities.get(key);
        match self {
            InputKind::Sampling => get("sampling").is_some(),
            InputKind::Roots => get("roots").is_some(),
            InputKind::FormElicitation => get("elicitation").is_some_and(|e| {
                // `{}` (2025-06-18 style) means form mode.
                e.get("form").is_some() || e.as_object().is_some_and(|o| o.is_empty())
            }),
            InputKind::UrlElicitation => get("elicitation").is_some_and(|e| e.get("url").is_some()),
        }
    }
}

impl InputKind {
    /// Whether `answer` has the shape of this kind's result (`CreateMessageResult`,
    /// `ElicitResult`, `ListRootsResult`): what a client sends in `inputResponses`
    /// is checked before an upstream sees it; anything else is no answer.
    pub(crate) fn accepts_answer(self, answer: &Value) -> bool {
        let Some(answer) = answer.as_object() else { return false };
        let text = |key: &str| answer.get(key).and_then(Value::as_str);
        match self {
            InputKind::Sampling => {
                text("role").is_some()
                    && text("model").is_some()
                    && answer.get("content").is_some_and(|c| c.is_object() || c.is_array())
            }
            InputKind::FormElicitation | InputKind::UrlElicitation => {
                matches!(text("action"), Some("accept" | "decline" | "cancel"))
            }
            InputKind::Roots => answer.get("roots").is_some_and(Value::is_array),
        }
    }

    /// The `ClientCapabilities` a client must declare to be asked for this kind
    /// (`error.data.requiredCapabilities` of a `-32021`).
    pub(crate) fn required_capability(self) -> Value {
        match self {
            InputKind::Sampling => json!({"sampling": {}}),
            InputKind::Roots => json!({"roots": {}}),
            InputKind::FormElicitation => json!({"elicitation": {"form": {}}}),
            InputKind::UrlElicitation => json!({"elicitation": {"url": {}}}),
        }
    }
}

/// The `ClientCapabilities` that would let a client be asked for every one of `kinds`.
pub(crate) fn required_capabilities(kinds: impl IntoIterator<Item = InputKind>) -> Value {
    let mut required = Map::new();
    for kind in kinds {
        let Value::Object(capability) = kind.required_capability() else {
            continue;
        };
        for (name, modes) in capability {
            let entry = required.entry(name).or_insert_with(|| json!({}));
            if let (Some(entry), Value::Object(modes)) = (entry.as_object_mut(), modes) {
                entry.extend(modes);
            }
        }
    }
    Value::Object(required)
}

/// Whether a client declared any kind of input at all (such requests are best
/// kept one per upstream session, so that on stdio a server→client request can
/// only belong to them).
pub(crate) fn declares_input(capabilities: &Value) -> bool {
    ["sampling", "elicitation", "roots"]
        .iter()
        .any(|k| capabilities.get(*k).is_some())
}

/// The `_meta` member a legacy server may set on a server→client request to
/// name its `inputRequests` key (an eragate convention: a handshake-era request
/// has no name of its own, and clients of that era ignore unknown `_meta`).
pub(crate) const INPUT_KEY_META: &str = "dev.eragate/inputKey";

/// The longest input key a server may choose.
const MAX_NAMED_KEY: usize = 64;

/// The `inputRequests` keys of upstream requests asked together: the name a
/// server gave in [`INPUT_KEY_META`] when it is usable (1–64 of `A–Z a–z 0–9 _ . -`)
/// and not taken, else [`input_key`]. Keys are unique within one `input_required`.
pub(crate) fn input_keys(requests: Vec<Request>) -> Vec<(String, Request)> {
    let mut taken = std::collections::HashSet::with_capacity(requests.len());
    requests
        .into_iter()
        .map(|request| {
            let named = named_key(&request).filter(|k| !taken.contains(*k)).map(str::to_owned);
            let mut key = named.unwrap_or_else(|| input_key(&request));
            while taken.contains(&key) {
                key.push('_');
            }
            taken.insert(key.clone());
            (key, request)
        })
        .collect()
}

/// The input key a server named in [`INPUT_KEY_META`], when it is usable.
pub(crate) fn named_key(request: &Request) -> Option<&str> {
    let key = request.params.as_ref()?.get("_meta")?.get(INPUT_KEY_META)?.as_str()?;
    let usable = !key.is_empty()
        && key.len() <= MAX_NAMED_KEY
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    usable.then_some(key)
}

/// The default `inputRequests` key for an upstream request: its method's noun and the upstream's id.
pub(crate) fn input_key(request: &Request) -> String {
    let noun = request.method.split('/').next().unwrap_or("input");
    let id = request.id.to_value();
    match id {
        Value::String(s) => format!("{noun}-{s}"),
        other => format!("{noun}-{other}"),
    }
}

/// The `inputRequests` entry for an upstream request: `{method, params}`, no
/// JSON-RPC id, no `elicitationId` (the gateway keeps it) and no [`INPUT_KEY_META`].
pub(crate) fn input_request(request: &Request) -> Value {
    let mut params = request.params.clone().map_or_else(|| json!({}), LazyJson::into_value);
    if let Some(object) = params.as_object_mut() {
        object.remove("elicitationId");
        let meta = object.get_mut("_meta").and_then(Value::as_object_mut);
        if let Some(meta) = meta {
            meta.remove(INPUT_KEY_META);
            if meta.is_empty() {
                object.remove("_meta");
            }
        }
    }
    json!({"method": request.method, "params": params})
}

/// An `InputRequiredResult`.
pub(crate) fn input_required(requests: &[(String, Value)], request_state: &str) -> Value {
    let input_requests: Map<String, Value> = requests.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    json!({
        "resultType": "input_required",
        "inputRequests": input_requests,
        "requestState": request_state,
    })
}

/// What a legacy client is asked for one `inputRequests` entry of a modern
/// upstream's `input_required`: its method and params, a fresh `elicitationId`
/// (from `elicitation_id`) in URL mode. A `-32021` when the client did not
/// negotiate that kind (URL mode needs 2025-11-25).
pub(crate) fn legacy_question(
    asked: &Value,
    capabilities: &Value,
    revision: Revision,
    elicitation_id: impl FnOnce() -> String,
) -> Result<(String, Value), ErrorObject> {
    let method = asked.get("method").and_then(Value::as_str).unwrap_or("");
    let mut params = asked.get("params").cloned().unwrap_or_else(|| json!({}));
    let probe = Request {
        id: crate::protocol::Id::number(0),
        method: method.to_owned(),
        params: Some(params.clone().into()),
    };
    let kind = InputKind::of(&probe);
    let allowed = kind.is_some_and(|k| k.declared_by(capabilities))
        && (kind != Some(InputKind::UrlElicitation) || revision >= Revision::V2025_11_25);
    if !allowed {
        let required = kind.map_or_else(|| json!({}), InputKind::required_capability);
        return Err(ErrorObject::missing_client_capability(
            required,
            format!("the upstream needs {method}, which this client did not declare"),
        ));
    }
    if kind == Some(InputKind::UrlElicitation)
        && let Some(object) = params.as_object_mut()
    {
        object.insert("elicitationId".into(), Value::from(elicitation_id()));
    }
    Ok((method.to_owned(), params))
}

/// The params re-issuing a request to a modern upstream after its
/// `input_required`: the client's `answers` as `inputResponses`, and the
/// upstream's `requestState` (if it sent one).
pub(crate) fn reissue_params(mut params: Value, answers: Map<String, Value>, input_required: &Value) -> Value {
    if let Some(object) = params.as_object_mut() {
        object.insert("inputResponses".into(), Value::Object(answers));
        match input_required.get("requestState") {
            Some(state) => object.insert("requestState".into(), state.clone()),
            None => object.remove("requestState"),
        };
    }
    params
}

/// What a sealed `requestState` carries: the suspended call it names and what it is bound to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestStateClaims {
    /// The suspended call's handle in the gateway.
    pub(crate) handle: String,
    /// The method of the original request.
    pub method: String,
    /// `params_digest` of the original request.
    pub digest: String,
    /// Who asked.
    pub principal: String,
    /// Expiry, seconds since the Unix epoch.
    pub exp: u64,
}

/// A digest of the params that identify a request across retries: everything
/// but `_meta`, `inputResponses` and `requestState` (which a retry changes).
pub(crate) fn params_digest(params: Option<&Value>) -> String {
    let mut stable = params.and_then(Value::as_object).cloned().unwrap_or_default();
    for member in ["_meta", "inputResponses", "requestState"] {
        stable.remove(member);
    }
    // serde_json maps are ordered: equal params serialise equally.
    let bytes = serde_json::to_vec(&Value::Object(stable)).unwrap_or_default();
    Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Id;

    fn request(method: &str, params: Value) -> Request {
        Request {
            id: Id::number(7),
            method: method.into(),
            params: Some(params.into()),
        }
    }

    #[test]
    fn kinds_and_the_capabilities_they_need() {
        let sampling = request("sampling/createMessage", json!({"messages": []}));
        let form = request("elicitation/create", json!({"message": "m", "requestedSchema": {}}));
        let url = request(
            "elicitation/create",
            json!({"mode": "url", "url": "https://x", "elicitationId": "e1", "message": "m"}),
        );
        let roots = request("roots/list", json!({}));
        let cases = [
            (&sampling, json!({"sampling": {}}), true),
            (&sampling, json!({"elicitation": {}}), false),
            (&form, json!({"elicitation": {}}), true),
            (&form, json!({"elicitation": {"form": {}}}), true),
            (&form, json!({"elicitation": {"url": {}}}), false),
            (&url, json!({"elicitation": {"url": {}}}), true),
            (&url, json!({"elicitation": {"form": {}}}), false),
            (&roots, json!({"roots": {}}), true),
            (&roots, json!({}), false),
        ];
        for (request, capabilities, expected) in cases {
            let kind = InputKind::of(request).unwrap();
            assert_eq!(kind.declared_by(&capabilities), expected, "{kind:?} {capabilities}");
        }
        assert_eq!(InputKind::of(&request("ping", json!({}))), None);
    }

    #[test]
    fn answers_must_have_their_kinds_shape() {
        let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"});
        let table = [
            (InputKind::Sampling, sampled.clone(), true),
            (
                InputKind::Sampling,
                json!({"role": "assistant", "content": [], "model": "m"}),
                true,
            ),
            (InputKind::Sampling, json!({"role": "assistant", "model": "m"}), false),
            (
                InputKind::FormElicitation,
                json!({"action": "accept", "content": {"name": "A"}}),
                true,
            ),
            (InputKind::FormElicitation, json!({"action": "decline"}), true),
            (InputKind::UrlElicitation, json!({"action": "cancel"}), true),
            (InputKind::FormElicitation, json!({"action": "maybe"}), false),
            (InputKind::FormElicitation, json!(12345), false),
            (InputKind::Roots, json!({"roots": [{"uri": "file:///x"}]}), true),
            (InputKind::Roots, json!({"roots": "file:///x"}), false),
            (InputKind::Roots, sampled, false),
        ];
        for (kind, answer, accepted) in table {
            assert_eq!(kind.accepts_answer(&answer), accepted, "{kind:?} {answer}");
        }
    }

    #[test]
    fn each_kind_names_the_capability_it_needs() {
        let kinds = [
            InputKind::Sampling,
            InputKind::Roots,
            InputKind::FormElicitation,
            InputKind::UrlElicitation,
        ];
        for kind in kinds {
            let required = kind.required_capability();
            assert!(kind.declared_by(&required), "{kind:?}: {required}");
            assert!(!kind.declared_by(&json!({})), "{kind:?}");
        }
        assert_eq!(InputKind::Sampling.required_capability(), json!({"sampling": {}}));
        let table = [
            (vec![InputKind::Sampling], json!({"sampling": {}})),
            (
                vec![InputKind::Sampling, InputKind::Roots],
                json!({"sampling": {}, "roots": {}}),
            ),
            (
                vec![
                    InputKind::FormElicitation,
                    InputKind::UrlElicitation,
                    InputKind::FormElicitation,
                ],
                json!({"elicitation": {"form": {}, "url": {}}}),
            ),
            (vec![], json!({})),
        ];
        for (kinds, expected) in table {
            assert_eq!(required_capabilities(kinds.clone()), expected, "{kinds:?}");
        }
    }

    #[test]
    fn input_requests_carry_no_id_and_no_elicitation_id() {
        let url = request(
            "elicitation/create",
            json!({"mode": "url", "url": "https://x", "elicitationId": "e1", "message": "m"}),
        );
        assert_eq!(input_key(&url), "elicitation-7");
        assert_eq!(
            input_request(&url),
            json!({"method": "elicitation/create", "params": {"mode": "url", "url": "https://x", "message": "m"}})
        );
        let result = input_required(&[("elicitation-7".into(), input_request(&url))], "state");
        assert_eq!(result["resultType"], "input_required");
        assert_eq!(result["requestState"], "state");
    }

    #[test]
    fn servers_may_name_their_inputs() {
        let named = |id: u64, key: Value| Request {
            id: Id::number(id),
            method: "elicitation/create".into(),
            params: Some(json!({"message": "m", "_meta": {INPUT_KEY_META: key, "other": 1}}).into()),
        };
        let cases = [
            (vec![named(1, json!("user_name"))], vec!["user_name"]),
            (
                vec![named(1, json!("a")), named(2, json!("a"))],
                vec!["a", "elicitation-2"],
            ),
            (vec![named(1, json!("has space"))], vec!["elicitation-1"]),
            (vec![named(1, json!(""))], vec!["elicitation-1"]),
            (vec![named(1, json!(7))], vec!["elicitation-1"]),
            (vec![named(1, json!("k".repeat(65)))], vec!["elicitation-1"]),
            (
                vec![
                    named(1, json!("elicitation-2")),
                    request("elicitation/create", json!({})),
                ],
                vec!["elicitation-2", "elicitation-7"],
            ),
            (
                vec![named(7, json!("elicitation-7")), named(7, json!("x y"))],
                vec!["elicitation-7", "elicitation-7_"],
            ),
        ];
        for (requests, expected) in cases {
            let keys: Vec<String> = input_keys(requests).into_iter().map(|(k, _)| k).collect();
            assert_eq!(keys, expected);
        }
        // The name is eragate's; the rest of `_meta` is the server's and passes through.
        assert_eq!(
            input_request(&named(1, json!("user_name"))),
            json!({"method": "elicitation/create", "params": {"message": "m", "_meta": {"other": 1}}})
        );
        let only_name = Request {
            params: Some(json!({"message": "m", "_meta": {INPUT_KEY_META: "k"}}).into()),
            ..named(1, json!("k"))
        };
        assert_eq!(
            input_request(&only_name),
            json!({"method": "elicitation/create", "params": {"message": "m"}})
        );
    }

    #[test]
    fn legacy_clients_are_asked_only_what_they_negotiated() {
        let url =
            json!({"method": "elicitation/create", "params": {"mode": "url", "url": "https://x", "message": "m"}});
        let form = json!({"method": "elicitation/create", "params": {"message": "m"}});
        let sampling = json!({"method": "sampling/createMessage", "params": {"messages": []}});
        let id = || "e1".to_owned();
        let both = json!({"elicitation": {"form": {}, "url": {}}});
        let cases = [
            (
                &form,
                json!({"elicitation": {}}),
                Revision::V2025_06_18,
                Ok(json!({"message": "m"})),
            ),
            (
                &url,
                both.clone(),
                Revision::V2025_11_25,
                Ok(json!({"mode": "url", "url": "https://x", "message": "m", "elicitationId": "e1"})),
            ),
            (
                &url,
                both,
                Revision::V2025_06_18,
                Err(json!({"elicitation": {"url": {}}})),
            ),
            (
                &sampling,
                json!({"roots": {}}),
                Revision::V2025_11_25,
                Err(json!({"sampling": {}})),
            ),
            (
                &json!({"method": "ping"}),
                json!({"sampling": {}}),
                Revision::V2025_11_25,
                Err(json!({})),
            ),
        ];
        for (asked, capabilities, revision, expected) in cases {
            let got = legacy_question(asked, &capabilities, revision, id)
                .map(|(_, params)| params)
                .map_err(|e| e.data.unwrap_or_default()["requiredCapabilities"].clone());
            assert_eq!(got, expected, "{asked} {capabilities} {revision:?}");
        }
        let answers: Map<String, Value> = [("k".to_owned(), json!({"action": "accept"}))].into_iter().collect();
        let params = json!({"name": "t", "requestState": "old"});
        assert_eq!(
            reissue_params(params.clone(), answers.clone(), &json!({"requestState": "new"})),
            json!({"name": "t", "inputResponses": {"k": {"action": "accept"}}, "requestState": "new"})
        );
        assert_eq!(
            reissue_params(params, answers, &json!({})),
            json!({"name": "t", "inputResponses": {"k": {"action": "accept"}}})
        );
    }

    #[test]
    fn digests_ignore_what_a_retry_changes() {
        let first = json!({"name": "t", "arguments": {"a": 1}, "_meta": {"progressToken": 1}});
        let retry =
            json!({"name": "t", "arguments": {"a": 1}, "inputResponses": {"k": {}}, "requestState": "s", "_meta": {}});
        let other = json!({"name": "t", "arguments": {"a": 2}});
        assert_eq!(params_digest(Some(&first)), params_digest(Some(&retry)));
        assert_ne!(params_digest(Some(&first)), params_digest(Some(&other)));
    }
}
