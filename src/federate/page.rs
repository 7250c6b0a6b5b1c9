//! One page of a federated list from the pages members gave: their items
//! (already exposed) in member order, the members left out with why, and the
//! caching hints the members' own allow: the shortest `ttlMs`, `public` only
//! if every member's page was, `ttlMs: 0` when a member is missing (the page
//! is stale as soon as it is back). Pure.

use serde_json::{Map, Value, json};

use super::route::ListShape;
use crate::protocol::ErrorObject;

/// `_meta` key of a federated list result: the members left out of it, each `{name, error}`.
pub(crate) const LEFT_OUT_META: &str = "dev.eragate/leftOut";

/// The items of one federated page, with what members said about caching.
#[derive(Debug, Default)]
pub(crate) struct MergedPage {
    items: Vec<Value>,
    /// The shortest `ttlMs` any member gave.
    ttl_ms: Option<u64>,
    /// Whether any member's page was `private`, or said nothing.
    private: bool,
    left_out: Vec<Value>,
    /// The first failure, for a page no member answered.
    first_error: Option<ErrorObject>,
    answered: usize,
}

impl MergedPage {
    /// A member's `page`, whose items are `items` as exposed.
    pub(crate) fn add(&mut self, page: &Value, items: Vec<Value>) {
        self.items.extend(items);
        self.answered += 1;
        let ttl = page.get("ttlMs").and_then(Value::as_u64).unwrap_or(0);
        self.ttl_ms = Some(self.ttl_ms.map_or(ttl, |t| t.min(ttl)));
        self.private |= page.get("cacheScope").and_then(Value::as_str) != Some("public");
    }

    /// Member `member` is left out of the page for `error`.
    pub(crate) fn leave_out(&mut self, member: &str, error: ErrorObject) {
        self.left_out.push(json!({"name": member, "error": error.message}));
        self.first_error.get_or_insert(error);
    }

    /// The page of `shape`; an error when members were asked and none answered.
    pub(crate) fn into_result(self, shape: ListShape, next_cursor: Option<String>) -> Result<Value, ErrorObject> {
        if self.answered == 0
            && let Some(error) = self.first_error
        {
            return Err(ErrorObject::new(
                error.code,
                format!("no member of this federation answered: {}", error.message),
            ));
        }
        let mut result = Map::new();
        result.insert(shape.items_key().into(), Value::Array(self.items));
        if let Some(next) = next_cursor {
            result.insert("nextCursor".into(), Value::from(next));
        }
        result.insert("resultType".into(), Value::from("complete"));
        let ttl = match self.left_out.is_empty() {
            true => self.ttl_ms.unwrap_or(0),
            false => 0,
        };
        result.insert("ttlMs".into(), Value::from(ttl));
        let scope = if self.private { "private" } else { "public" };
        result.insert("cacheScope".into(), Value::from(scope));
        if !self.left_out.is_empty() {
            result.insert("_meta".into(), json!({ LEFT_OUT_META: self.left_out }));
        }
        Ok(Value::Object(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::federate::route::NameKind;
    use crate::protocol::ErrorCode;

    /// A member's answer: its page, or the error that left it out.
    enum Answer {
        Page(Value),
        Failed(&'static str),
    }

    fn merged(answers: Vec<Answer>) -> Result<Value, ErrorObject> {
        let mut page = MergedPage::default();
        for (i, answer) in answers.into_iter().enumerate() {
            match answer {
                Answer::Page(member_page) => {
                    let items = member_page["tools"].as_array().cloned().unwrap_or_default();
                    page.add(&member_page, items);
                }
                Answer::Failed(why) => {
                    page.leave_out(&format!("m{i}"), ErrorObject::new(ErrorCode::INTERNAL_ERROR, why));
                }
            }
        }
        page.into_result(ListShape::Named(NameKind::Tools), None)
    }

    #[test]
    fn members_pages_become_one() {
        use Answer::{Failed, Page};
        let public =
            |ttl: u64, name: &str| Page(json!({"tools": [{"name": name}], "ttlMs": ttl, "cacheScope": "public"}));
        #[rustfmt::skip]
        let cases = [
            ("every member public: the shortest ttl, public",
             vec![public(30_000, "a"), public(5_000, "b")],
             Ok(json!({"tools": [{"name": "a"}, {"name": "b"}], "resultType": "complete", "ttlMs": 5_000, "cacheScope": "public"}))),
            ("one private member makes the page private",
             vec![public(30_000, "a"), Page(json!({"tools": [], "ttlMs": 10_000, "cacheScope": "private"}))],
             Ok(json!({"tools": [{"name": "a"}], "resultType": "complete", "ttlMs": 10_000, "cacheScope": "private"}))),
            ("a member saying nothing is neither cacheable nor public",
             vec![public(30_000, "a"), Page(json!({"tools": [{"name": "b"}]}))],
             Ok(json!({"tools": [{"name": "a"}, {"name": "b"}], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}))),
            ("a member left out: named, and the page not to be kept",
             vec![public(30_000, "a"), Failed("down")],
             Ok(json!({"tools": [{"name": "a"}], "resultType": "complete", "ttlMs": 0, "cacheScope": "public",
                       "_meta": {LEFT_OUT_META: [{"name": "m1", "error": "down"}]}}))),
        ];
        for (what, answers, expected) in cases {
            assert_eq!(merged(answers), expected, "{what}");
        }
        let none = merged(vec![Failed("down"), Failed("slow")]).unwrap_err();
        assert_eq!(none.message, "no member of this federation answered: down");
        let no_member_asked = merged(vec![]).unwrap();
        assert_eq!(
            no_member_asked["tools"],
            json!([]),
            "the walk is over: an empty last page"
        );
    }
}
