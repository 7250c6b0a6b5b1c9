//! Requests and results across the federation's names: which member owns a
//! request (by the tool or prompt name, the resource URI, or the completion's
//! reference) and its params with the member's own name restored; a member's
//! list items, read contents and notifications with names and URIs exposed;
//! members' pages merged into one. Pure: values in, values out.

use serde_json::{Map, Value};

use super::names::{Names, PrefixMode, SEPARATOR, restore_uri, rewrite_uri};
use crate::protocol::ModernMethod;

/// The lists whose names carry a member's prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NameKind {
    /// `tools/list`, `tools/call`.
    Tools,
    /// `prompts/list`, `prompts/get`, `ref/prompt` completions.
    Prompts,
}

impl NameKind {
    /// The list a `…/list_changed` notification is about, when it names one.
    pub(crate) fn of_notification(method: &str) -> Option<NameKind> {
        match method {
            "notifications/tools/list_changed" => Some(NameKind::Tools),
            "notifications/prompts/list_changed" => Some(NameKind::Prompts),
            _ => None,
        }
    }

    /// The list method of this kind.
    pub(crate) fn list_method(self) -> ModernMethod {
        match self {
            NameKind::Tools => ModernMethod::ToolsList,
            NameKind::Prompts => ModernMethod::PromptsList,
        }
    }
}

/// A federated list: where its items are and which member of an item is exposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListShape {
    /// `tools` or `prompts`, by `name`.
    Named(NameKind),
    /// `resources`, by `uri`.
    Resources,
    /// `resourceTemplates`, by `uriTemplate`.
    Templates,
}

impl ListShape {
    /// The shape of a list method's result; `None` for any other method.
    pub(crate) fn of(method: ModernMethod) -> Option<ListShape> {
        match method {
            ModernMethod::ToolsList => Some(ListShape::Named(NameKind::Tools)),
            ModernMethod::PromptsList => Some(ListShape::Named(NameKind::Prompts)),
            ModernMethod::ResourcesList => Some(ListShape::Resources),
            ModernMethod::ResourceTemplatesList => Some(ListShape::Templates),
            _ => None,
        }
    }

    /// The result member holding the items.
    pub(crate) fn items_key(self) -> &'static str {
        match self {
            ListShape::Named(NameKind::Tools) => "tools",
            ListShape::Named(NameKind::Prompts) => "prompts",
            ListShape::Resources => "resources",
            ListShape::Templates => "resourceTemplates",
        }
    }

    /// The item member that is exposed under the member's prefix.
    fn field(self) -> &'static str {
        match self {
            ListShape::Named(_) => "name",
            ListShape::Resources => "uri",
            ListShape::Templates => "uriTemplate",
        }
    }
}

/// How exposed names are traced back: the mode, the members' prefixes and,
/// under `on_collision` and `never`, the names built from complete listings.
pub(crate) struct Naming<'a> {
    /// When names are prefixed.
    pub(crate) mode: PrefixMode,
    /// Each member's prefix, by index.
    pub(crate) prefixes: &'a [&'a str],
    /// The exposed names (needed unless the mode is `always`).
    pub(crate) names: Option<&'a Names>,
}

/// A request no member owns: the name or URI it used, and its params untouched.
pub(crate) type Unrouted = (String, Value);

impl Naming<'_> {
    /// The member owning exposed `name` of `kind`, and its own name for it.
    pub(crate) fn owner(&self, exposed: &str) -> Option<(usize, String)> {
        match (self.mode, self.names) {
            // Prefixes hold no separator (they are URI-scheme letters): the first one ends it.
            (PrefixMode::Always, _) => {
                let (prefix, name) = exposed.split_once(SEPARATOR)?;
                let member = self.prefixes.iter().position(|p| *p == prefix)?;
                Some((member, name.to_owned()))
            }
            (_, Some(names)) => names.owner(exposed).map(|(member, name)| (member, name.to_owned())),
            (_, None) => None,
        }
    }

    /// How member `member`'s `name` is exposed.
    pub(crate) fn expose(&self, member: usize, name: &str) -> Option<String> {
        match (self.mode, self.names) {
            (PrefixMode::Always, _) => Some(format!("{}{SEPARATOR}{name}", self.prefixes.get(member)?)),
            (_, Some(names)) => names.exposed(member, name).map(str::to_owned),
            (_, None) => None,
        }
    }

    /// Whose request of `method` with `params` is, by its name, URI or
    /// reference, taking the params (no copy of them, which a call's arguments
    /// can make large): the owner and its params (its own name or URI
    /// restored), or the unknown name and the params as they came.
    pub(crate) fn route_owned(&self, method: ModernMethod, params: Option<Value>) -> Result<(usize, Value), Unrouted> {
        let mut params = params.unwrap_or_else(|| Value::Object(Map::new()));
        let (slot, by_uri): (Option<&mut Value>, bool) = match method {
            ModernMethod::ToolsCall | ModernMethod::PromptsGet => (params.get_mut("name"), false),
            ModernMethod::ResourcesRead => (params.get_mut("uri"), true),
            ModernMethod::CompletionComplete => {
                let reference = params.get_mut("ref");
                let by_uri = reference.as_ref().and_then(|r| r.get("type")) == Some(&Value::from("ref/resource"));
                let key = if by_uri { "uri" } else { "name" };
                (reference.and_then(|r| r.get_mut(key)), by_uri)
            }
            _ => (None, false),
        };
        let Some(slot) = slot else {
            return Err((String::new(), params));
        };
        let exposed = slot.as_str().unwrap_or_default().to_owned();
        let owner = if by_uri {
            restore_uri(self.prefixes, &exposed).map(|(m, uri)| (m, uri.to_owned()))
        } else {
            self.owner(&exposed)
        };
        match owner {
            Some((member, own)) => {
                *slot = Value::from(own);
                Ok((member, params))
            }
            None => Err((exposed, params)),
        }
    }

    /// Member `member`'s list `result` with its items exposed; items the
    /// names do not know are left out (the names are stale: the caller rebuilds them).
    pub(crate) fn expose_items(
        &self,
        shape: ListShape,
        member: usize,
        result: &Value,
    ) -> Result<Vec<Value>, StaleNames> {
        let prefix = self.prefixes.get(member).copied().unwrap_or_default();
        let items = result.get(shape.items_key()).and_then(Value::as_array);
        let mut exposed = Vec::with_capacity(items.map_or(0, Vec::len));
        for item in items.into_iter().flatten() {
            let mut item = item.clone();
            let Some(own) = item.get(shape.field()).and_then(Value::as_str) else {
                continue; // not an item a client could use
            };
            let name = match shape {
                ListShape::Named(_) => self.expose(member, own).ok_or(StaleNames)?,
                ListShape::Resources | ListShape::Templates => rewrite_uri(prefix, own),
            };
            if let Some(object) = item.as_object_mut() {
                object.insert(shape.field().into(), Value::from(name));
            }
            exposed.push(item);
        }
        Ok(exposed)
    }
}

/// A member listed a name the exposed names do not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StaleNames;

/// Member `prefix`'s `resources/read` result with its contents' URIs exposed.
pub(crate) fn expose_read(prefix: &str, mut result: Value) -> Value {
    if let Some(contents) = result.get_mut("contents").and_then(Value::as_array_mut) {
        for content in contents {
            expose_uri_member(prefix, content, "uri");
        }
    }
    result
}

/// A member's notification as the federation's clients see it: a resource's
/// URI exposed (`notifications/resources/updated`); everything else as it came.
pub(crate) fn expose_notification(prefix: &str, method: &str, params: &mut Option<Value>) {
    if method == "notifications/resources/updated"
        && let Some(params) = params
    {
        expose_uri_member(prefix, params, "uri");
    }
}

fn expose_uri_member(prefix: &str, object: &mut Value, key: &str) {
    if let Some(slot) = object.get_mut(key)
        && let Some(uri) = slot.as_str()
    {
        *slot = Value::from(rewrite_uri(prefix, uri));
    }
}

/// Every member's names of one kind, from complete listings, exposed as `mode`
/// says; a collision names both members.
pub(crate) fn build_names(mode: PrefixMode, prefixes: &[&str], lists: &[Vec<String>]) -> Result<Names, String> {
    Names::expose(mode, prefixes, lists).map_err(|collision| {
        let member = |i: usize| prefixes.get(i).copied().unwrap_or_default().to_owned();
        format!(
            "members {} and {} both offer {:?} (prefix_mode = \"never\")",
            member(collision.first),
            member(collision.second),
            collision.name
        )
    })
}

/// The names in a member's list result of `shape`.
pub(crate) fn item_names(shape: ListShape, result: &Value) -> Vec<String> {
    result
        .get(shape.items_key())
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| item.get(shape.field())?.as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_route_to_their_owner() {
        let prefixes = ["everything", "py", "ts2"];
        let names = Names::expose(
            PrefixMode::OnCollision,
            &prefixes,
            &[
                vec!["echo".into(), "add".into()],
                vec!["echo".into()],
                vec!["greet".into()],
            ],
        )
        .unwrap();
        let always = Naming {
            mode: PrefixMode::Always,
            prefixes: &prefixes,
            names: None,
        };
        let collision = Naming {
            mode: PrefixMode::OnCollision,
            prefixes: &prefixes,
            names: Some(&names),
        };
        #[rustfmt::skip]
        let cases = [
            ("always: tool by prefix", &always, ModernMethod::ToolsCall,
             json!({"name": "py_echo", "arguments": {"x": 1}}),
             Ok((1, json!({"name": "echo", "arguments": {"x": 1}})))),
            ("always: a name with the separator keeps it", &always, ModernMethod::PromptsGet,
             json!({"name": "ts2_simple_prompt"}), Ok((2, json!({"name": "simple_prompt"})))),
            ("always: unknown prefix", &always, ModernMethod::ToolsCall,
             json!({"name": "nobody_echo"}), Err("nobody_echo".into())),
            ("on collision: a shared name is prefixed", &collision, ModernMethod::ToolsCall,
             json!({"name": "everything_echo"}), Ok((0, json!({"name": "echo"})))),
            ("on collision: a lone name is not", &collision, ModernMethod::ToolsCall,
             json!({"name": "greet"}), Ok((2, json!({"name": "greet"})))),
            ("a resource by its URI", &collision, ModernMethod::ResourcesRead,
             json!({"uri": "py+test://static/1"}), Ok((1, json!({"uri": "test://static/1"})))),
            ("a prompt completion", &always, ModernMethod::CompletionComplete,
             json!({"ref": {"type": "ref/prompt", "name": "everything_complex"}, "argument": {"name": "a", "value": "x"}}),
             Ok((0, json!({"ref": {"type": "ref/prompt", "name": "complex"}, "argument": {"name": "a", "value": "x"}})))),
            ("a resource completion", &always, ModernMethod::CompletionComplete,
             json!({"ref": {"type": "ref/resource", "uri": "ts2+test://{id}"}}),
             Ok((2, json!({"ref": {"type": "ref/resource", "uri": "test://{id}"}})))),
            ("no name at all", &always, ModernMethod::ToolsCall, json!({}), Err(String::new())),
        ];
        for (what, naming, method, params, expected) in cases {
            let owner = naming.route_owned(method, Some(params)).map_err(|(exposed, _)| exposed);
            assert_eq!(owner, expected, "{what}");
        }
    }

    #[test]
    fn members_items_are_exposed() {
        let prefixes = ["a", "b"];
        let never = Names::expose(PrefixMode::Never, &prefixes, &[vec!["x".into()], vec!["y".into()]]).unwrap();
        let naming = Naming {
            mode: PrefixMode::Never,
            prefixes: &prefixes,
            names: Some(&never),
        };
        let tools = json!({"tools": [{"name": "y", "inputSchema": {}}, {"title": "no name"}]});
        assert_eq!(
            naming.expose_items(ListShape::Named(NameKind::Tools), 1, &tools),
            Ok(vec![json!({"name": "y", "inputSchema": {}})])
        );
        let stale = json!({"tools": [{"name": "z"}]});
        assert_eq!(
            naming.expose_items(ListShape::Named(NameKind::Tools), 1, &stale),
            Err(StaleNames)
        );
        let templates = json!({"resourceTemplates": [{"uriTemplate": "test://{id}", "name": "t"}]});
        assert_eq!(
            naming.expose_items(ListShape::Templates, 0, &templates),
            Ok(vec![json!({"uriTemplate": "a+test://{id}", "name": "t"})])
        );
        let read = json!({"contents": [{"uri": "test://1", "text": "hi"}]});
        assert_eq!(
            expose_read("b", read),
            json!({"contents": [{"uri": "b+test://1", "text": "hi"}]})
        );
        let mut updated = Some(json!({"uri": "test://1"}));
        expose_notification("a", "notifications/resources/updated", &mut updated);
        assert_eq!(updated, Some(json!({"uri": "a+test://1"})));
        assert_eq!(
            item_names(ListShape::Resources, &json!({"resources": [{"uri": "u"}]})),
            ["u"]
        );
        let collision = build_names(PrefixMode::Never, &prefixes, &[vec!["x".into()], vec!["x".into()]]);
        assert_eq!(
            collision.unwrap_err(),
            "members a and b both offer \"x\" (prefix_mode = \"never\")"
        );
    }
}
