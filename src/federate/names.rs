//! Exposed names: a member's tool or prompt name under its prefix, and the
//! member that owns an exposed name; a member's resource URI rewritten so that
//! two members' URIs cannot clash, and back. Reversible by construction: every
//! exposed name maps to exactly one (member, original name).

use std::collections::HashMap;

/// When a member's names get its prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefixMode {
    /// Every name: `<prefix>_<name>`.
    Always,
    /// Only names two members share (and, should the prefixed name meet another
    /// member's name, every name of the members involved).
    OnCollision,
    /// No name; two members offering one name is a configuration error.
    Never,
}

/// The separator between a prefix and a name.
pub(crate) const SEPARATOR: char = '_';

/// Two members offer one exposed name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("members {first} and {second} both offer {name:?}")]
pub(crate) struct Collision {
    /// The exposed name.
    pub(crate) name: String,
    /// One member (its index).
    pub(crate) first: usize,
    /// The other.
    pub(crate) second: usize,
}

/// The exposed names of one list (tools, or prompts) across the members.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Names {
    owners: HashMap<String, (usize, String)>,
    exposed: HashMap<(usize, String), String>,
}

impl Names {
    /// Exposes `lists[i]` (member `i`'s names) under `prefixes[i]` as `mode` says.
    pub(crate) fn expose(mode: PrefixMode, prefixes: &[&str], lists: &[Vec<String>]) -> Result<Names, Collision> {
        let mut prefixed_members = vec![mode == PrefixMode::Always; lists.len()];
        let shared = shared_names(lists);
        loop {
            let mut names = Names::default();
            let mut retry = false;
            for (member, list) in lists.iter().enumerate() {
                for name in list {
                    let prefix =
                        prefixed_members[member] || (mode == PrefixMode::OnCollision && shared.contains_key(name));
                    let exposed = match prefix {
                        true => format!("{}{SEPARATOR}{name}", prefixes.get(member).copied().unwrap_or_default()),
                        false => name.clone(),
                    };
                    if let Some((first, _)) = names.owners.get(&exposed) {
                        let first = *first;
                        if first == member {
                            continue; // a member listing a name twice: one owner still
                        }
                        if mode == PrefixMode::OnCollision && !(prefixed_members[first] && prefixed_members[member]) {
                            prefixed_members[first] = true;
                            prefixed_members[member] = true;
                            retry = true;
                            break;
                        }
                        return Err(Collision {
                            name: exposed,
                            first,
                            second: member,
                        });
                    }
                    names.exposed.insert((member, name.clone()), exposed.clone());
                    names.owners.insert(exposed, (member, name.clone()));
                }
                if retry {
                    break;
                }
            }
            if !retry {
                return Ok(names);
            }
        }
    }

    /// The member owning `exposed`, and its own name for it.
    pub(crate) fn owner(&self, exposed: &str) -> Option<(usize, &str)> {
        self.owners.get(exposed).map(|(member, name)| (*member, name.as_str()))
    }

    /// How member `member`'s `name` is exposed.
    pub(crate) fn exposed(&self, member: usize, name: &str) -> Option<&str> {
        self.exposed.get(&(member, name.to_owned())).map(String::as_str)
    }
}

/// Names offered by two members or more, with the first member offering each.
fn shared_names(lists: &[Vec<String>]) -> HashMap<String, usize> {
    let mut first: HashMap<&str, usize> = HashMap::new();
    let mut shared = HashMap::new();
    for (member, list) in lists.iter().enumerate() {
        for name in list {
            match first.get(name.as_str()) {
                Some(owner) if *owner != member => {
                    shared.insert(name.clone(), *owner);
                }
                Some(_) => {}
                None => {
                    first.insert(name, member);
                }
            }
        }
    }
    shared
}

/// Member `prefix`'s resource URI (or URI template) as clients see it:
/// `<prefix>+<uri>`, itself a URI (or template) whose scheme names the member.
pub(crate) fn rewrite_uri(prefix: &str, uri: &str) -> String {
    format!("{prefix}+{uri}")
}

/// The member (by prefix, among `prefixes`) and its own URI behind an exposed one.
pub(crate) fn restore_uri<'a>(prefixes: &[&str], exposed: &'a str) -> Option<(usize, &'a str)> {
    let (prefix, uri) = exposed.split_once('+')?;
    let member = prefixes.iter().position(|p| *p == prefix)?;
    Some((member, uri))
}

/// Whether `prefix` can name a member in a URI scheme (RFC 3986: a letter,
/// then letters, digits, `-` or `.`; no `+`, which ends it).
pub(crate) fn is_uri_prefix(prefix: &str) -> bool {
    let mut chars = prefix.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lists(members: &[&[&str]]) -> Vec<Vec<String>> {
        members
            .iter()
            .map(|names| names.iter().map(|n| (*n).to_owned()).collect())
            .collect()
    }

    /// Every exposed name, sorted, as `exposed=member:name`.
    fn table(names: &Names) -> Vec<String> {
        let mut rows: Vec<String> = names
            .owners
            .iter()
            .map(|(exposed, (member, name))| format!("{exposed}={member}:{name}"))
            .collect();
        rows.sort();
        rows
    }

    #[test]
    fn prefix_modes() {
        use PrefixMode::{Always, Never, OnCollision};
        type Case = (
            &'static str,
            PrefixMode,
            Vec<Vec<String>>,
            Result<Vec<&'static str>, Collision>,
        );
        let prefixes = ["a", "b", "c"];
        #[rustfmt::skip]
        let cases: [Case; 7] = [
            ("always: every name", Always, lists(&[&["echo"], &["echo", "add"]]),
             Ok(vec!["a_echo=0:echo", "b_add=1:add", "b_echo=1:echo"])),
            ("on collision: only the shared name", OnCollision, lists(&[&["echo", "x"], &["echo", "add"]]),
             Ok(vec!["a_echo=0:echo", "add=1:add", "b_echo=1:echo", "x=0:x"])),
            ("on collision: a prefixed name meets a plain one, both members prefixed",
             OnCollision, lists(&[&["echo"], &["echo", "a_echo"]]),
             Ok(vec!["a_echo=0:echo", "b_a_echo=1:a_echo", "b_echo=1:echo"])),
            ("never: distinct names pass", Never, lists(&[&["echo"], &["add"]]),
             Ok(vec!["add=1:add", "echo=0:echo"])),
            ("never: a shared name is refused", Never, lists(&[&["echo"], &["add"], &["echo"]]),
             Err(Collision { name: "echo".into(), first: 0, second: 2 })),
            ("a member listing a name twice is no collision", Never, lists(&[&["echo", "echo"]]),
             Ok(vec!["echo=0:echo"])),
            ("always: three members, one name", Always, lists(&[&["x"], &["x"], &["x"]]),
             Ok(vec!["a_x=0:x", "b_x=1:x", "c_x=2:x"])),
        ];
        for (what, mode, lists, expected) in cases {
            let got = Names::expose(mode, &prefixes, &lists);
            match (got, expected) {
                (Ok(names), Ok(rows)) => {
                    assert_eq!(table(&names), rows, "{what}");
                    for row in rows {
                        let (exposed, owner) = row.split_once('=').unwrap();
                        let (member, name) = owner.split_once(':').unwrap();
                        let member: usize = member.parse().unwrap();
                        assert_eq!(names.owner(exposed), Some((member, name)), "{what}");
                        assert_eq!(names.exposed(member, name), Some(exposed), "{what}");
                    }
                }
                (Err(got), Err(expected)) => assert_eq!(got, expected, "{what}"),
                (got, expected) => panic!("{what}: {got:?} vs {expected:?}"),
            }
        }
        let same_prefix = Names::expose(Always, &["p", "p"], &lists(&[&["x"], &["x"]]));
        assert_eq!(same_prefix.unwrap_err().name, "p_x");
    }

    #[test]
    fn uris_round_trip() {
        let prefixes = ["everything", "py", "ts2"];
        let cases = [
            ("everything", "test://static/resource/1"),
            ("py", "test://static/hello"),
            ("ts2", "https://example.com/a+b?c=d"),
            ("py", "test://template/{id}/data"),
        ];
        for (prefix, uri) in cases {
            let exposed = rewrite_uri(prefix, uri);
            let member = prefixes.iter().position(|p| *p == prefix);
            assert_eq!(restore_uri(&prefixes, &exposed), member.map(|m| (m, uri)), "{exposed}");
        }
        assert_eq!(restore_uri(&prefixes, "other+test://x"), None);
        assert_eq!(restore_uri(&prefixes, "test://x"), None);
        let valid = ["py", "ts2", "a.b-c"];
        let invalid = ["", "2a", "a_b", "a+b", "é"];
        assert!(valid.iter().all(|p| is_uri_prefix(p)));
        assert!(invalid.iter().all(|p| !is_uri_prefix(p)));
    }
}
