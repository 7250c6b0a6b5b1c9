//! Configuration: the typed model, loading from TOML and from the command line,
//! and validation that names the key path of every mistake.
//!
//! Text becomes typed values (addresses, durations, URIs) once, here; the rest
//! of the gateway never re-checks them.

mod model;

pub use model::*;

use std::fmt;
use std::path::Path;

/// One problem with a configuration, located by its key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted key path, such as `upstreams[0].http.url`.
    pub path: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every problem found in a configuration.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    /// The problems, in file order where possible.
    pub issues: Vec<ConfigIssue>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.issues.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

impl ConfigError {
    fn one(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            issues: vec![ConfigIssue {
                path: path.into(),
                message: message.into(),
            }],
        }
    }
}

impl Config {
    /// Reads and validates a TOML file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::one(path.display().to_string(), format!("cannot read: {e}")))?;
        Config::from_toml(&text)
    }

    /// Parses and validates TOML text.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let deserializer =
            toml::Deserializer::parse(text).map_err(|e| ConfigError::one("(file)", e.to_string().trim().to_owned()))?;
        let config: Config = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let path = e.path().to_string();
            let message = e.inner().message().to_owned();
            ConfigError::one(if path == "." { "(root)".into() } else { path }, message)
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what types alone cannot: at least one upstream, one transport
    /// each, unique names and paths, sane bounds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Vec::new();
        let mut push = |path: String, message: &str| {
            issues.push(ConfigIssue {
                path,
                message: message.into(),
            })
        };
        if self.upstreams.is_empty() {
            push("upstreams".into(), "at least one [[upstreams]] entry is required");
        }
        if self.listen.max_body_bytes == 0 {
            push("listen.max_body_bytes".into(), "must be greater than 0");
        }
        if self.sessions.max_sessions == 0 {
            push("sessions.max_sessions".into(), "must be greater than 0");
        }
        let mut names = std::collections::HashSet::new();
        let mut paths = std::collections::HashSet::new();
        for (i, upstream) in self.upstreams.iter().enumerate() {
            let at = |key: &str| format!("upstreams[{i}].{key}");
            if upstream.name.is_empty() {
                push(at("name"), "must not be empty");
            } else if !names.insert(upstream.name.as_str()) {
                push(at("name"), "is used by another upstream; names must be unique");
            }
            if !upstream.path.starts_with('/') {
                push(at("path"), "must start with '/'");
            } else if !paths.insert(upstream.path.as_str()) {
                push(at("path"), "is served by another upstream; paths must be unique");
            }
            match (&upstream.stdio, &upstream.http) {
                (None, None) => push(
                    at("stdio"),
                    "each upstream needs exactly one transport: [upstreams.stdio] or [upstreams.http]",
                ),
                (Some(_), Some(_)) => push(
                    at("http"),
                    "each upstream needs exactly one transport; remove [upstreams.stdio] or [upstreams.http]",
                ),
                _ => {}
            }
            if let Some(stdio) = &upstream.stdio {
                if stdio.command.first().is_none_or(|c| c.is_empty()) {
                    push(at("stdio.command"), "must name a program: [\"program\", \"arg\", ...]");
                }
                if stdio.max_children == 0 {
                    push(at("stdio.max_children"), "must be greater than 0");
                }
                if stdio.spares > stdio.max_children {
                    push(at("stdio.spares"), "must not exceed stdio.max_children");
                }
            }
            if let Some(http) = &upstream.http
                && !matches!(http.url.scheme_str(), Some("http"))
            {
                push(at("http.url"), "must be an absolute http:// URL");
            }
            if upstream.max_in_flight == 0 {
                push(at("max_in_flight"), "must be greater than 0");
            }
        }
        if issues.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { issues })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_stdio_config() {
        let config =
            Config::from_toml("[[upstreams]]\nname = \"e\"\nstdio.command = [\"server\", \"stdio\"]\n").unwrap();
        assert_eq!(config.listen.address.to_string(), "127.0.0.1:8080");
        assert_eq!(config.upstreams[0].path, "/mcp");
        assert_eq!(config.upstreams[0].request_timeout.0.as_secs(), 60);
    }

    #[test]
    fn mistakes_name_their_key_path() {
        let cases = [
            (
                "[[upstreams]]\nname = \"e\"\nrequest_timeout = \"soon\"\nstdio.command = [\"x\"]\n",
                "upstreams[0].request_timeout",
            ),
            ("[listen]\nadress = \"127.0.0.1:1\"\n", "listen.adress"),
            ("[listen]\naddress = \"nowhere\"\n", "listen.address"),
            ("", "upstreams"),
            ("[[upstreams]]\nname = \"e\"\n", "upstreams[0].stdio"),
            (
                "[[upstreams]]\nname = \"e\"\nhttp.url = \"ftp://x/\"\n",
                "upstreams[0].http.url",
            ),
            (
                "[[upstreams]]\nname = \"e\"\nstdio.command = []\n",
                "upstreams[0].stdio.command",
            ),
            (
                "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\npath = \"/b\"\n",
                "upstreams[1].name",
            ),
            (
                "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\ncache.scope = \"world\"\n",
                "upstreams[0].cache.scope",
            ),
        ];
        for (text, path) in cases {
            let error = Config::from_toml(text).unwrap_err();
            assert!(error.issues.iter().any(|i| i.path == path), "{text:?} gave {error}");
        }
    }
}
