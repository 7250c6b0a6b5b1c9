//! `[upstreams.credentials]`: what eragate presents to an HTTP upstream (never the
//! client's own token), every key with its default, and the checks types alone
//! cannot make.

use std::path::PathBuf;

use serde::Deserialize;

use super::ConfigIssue;
use super::duration::Humantime;
use super::oauth::check_issuer;

/// `[upstreams.credentials]`: one of `kind = "none"` (the default), `"header"`,
/// `"client_credentials"` or `"token_exchange"`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum CredentialsConfig {
    /// Requests carry no credential of eragate's. A struct variant with no fields, so that
    /// a key given with it (a typo, a secret meant for another kind) is an error.
    None {},
    /// A static header (an API key, a long-lived token) read from the environment or a file.
    Header(HeaderCredential),
    /// An access token eragate obtains for itself by the OAuth client credentials
    /// grant from the upstream's own authorization server.
    ClientCredentials(OAuthClientCredential),
    /// RFC 8693: the client's validated access token exchanged, per principal, for
    /// one whose audience is the upstream.
    TokenExchange(OAuthClientCredential),
}

impl Default for CredentialsConfig {
    fn default() -> Self {
        CredentialsConfig::None {}
    }
}

impl CredentialsConfig {
    /// The environment variable holding this credential's secret, if it names one.
    pub(crate) fn secret_env_name(&self) -> Option<&str> {
        match self {
            CredentialsConfig::None {} => None,
            CredentialsConfig::Header(header) => header.value_env.as_deref(),
            CredentialsConfig::ClientCredentials(oauth) | CredentialsConfig::TokenExchange(oauth) => {
                oauth.client_secret_env.as_deref()
            }
        }
    }
}

/// `kind = "header"`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeaderCredential {
    /// The header's name. Default `Authorization`.
    #[serde(default = "default_header")]
    pub(crate) header: String,
    /// The environment variable holding the value.
    #[serde(default)]
    pub(crate) value_env: Option<String>,
    /// The file holding the value (surrounding whitespace trimmed).
    #[serde(default)]
    pub(crate) value_file: Option<PathBuf>,
    /// Text put before the value, e.g. `"Bearer "`. Default none.
    #[serde(default)]
    pub(crate) prefix: String,
}

/// `kind = "client_credentials"` and `kind = "token_exchange"`: eragate as an OAuth
/// client of the upstream's authorization server.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OAuthClientCredential {
    /// The authorization server's issuer identifier; its metadata (RFC 8414, then
    /// OpenID discovery) must name exactly this `issuer`. Required.
    pub(crate) issuer: String,
    /// eragate's client id there. Default: registered dynamically (RFC 7591) once
    /// per issuer per process, when the server has a `registration_endpoint`.
    #[serde(default)]
    pub(crate) client_id: Option<String>,
    /// The environment variable holding the client secret.
    #[serde(default)]
    pub(crate) client_secret_env: Option<String>,
    /// The file holding the client secret (surrounding whitespace trimmed).
    #[serde(default)]
    pub(crate) client_secret_file: Option<PathBuf>,
    /// The `scope` asked for. Default none.
    #[serde(default)]
    pub(crate) scope: Option<String>,
    /// The RFC 8707 `resource` asked for. Default: the upstream's URL (its first member).
    #[serde(default)]
    pub(crate) resource: Option<String>,
    /// RFC 8693 `audience` (token exchange only). Default none.
    #[serde(default)]
    pub(crate) audience: Option<String>,
    /// How long one request to the authorization server may take. Default 10 s.
    #[serde(default = "default_timeout")]
    pub(crate) timeout: Humantime,
    /// PEM bundle of the CA certificates trusted for the authorization server
    /// instead of the public roots compiled into eragate. Default: the public roots.
    #[serde(default)]
    pub(crate) ca: Option<PathBuf>,
}

impl OAuthClientCredential {
    /// The client secret, from the environment or the file; `Err` says why it cannot be read.
    pub(crate) fn secret(&self) -> Result<Option<String>, String> {
        read_value(self.client_secret_env.as_deref(), self.client_secret_file.as_ref())
    }
}

impl HeaderCredential {
    /// The header's value (prefix included); `Err` says why it cannot be read.
    pub(crate) fn value(&self) -> Result<String, String> {
        match read_value(self.value_env.as_deref(), self.value_file.as_ref())? {
            Some(value) => Ok(format!("{}{value}", self.prefix)),
            None => Err("give one of `value_env` or `value_file`".into()),
        }
    }
}

/// A secret from the environment variable `env` or the file `file` (at most one).
fn read_value(env: Option<&str>, file: Option<&PathBuf>) -> Result<Option<String>, String> {
    match (env, file) {
        (Some(_), Some(_)) => Err("give only one of the environment variable or the file".into()),
        (Some(name), None) => match std::env::var(name) {
            Ok(value) if !value.is_empty() => Ok(Some(value)),
            _ => Err(format!("environment variable {name} is not set")),
        },
        (None, Some(path)) => match std::fs::read_to_string(path) {
            Ok(text) if !text.trim().is_empty() => Ok(Some(text.trim().to_owned())),
            Ok(_) => Err(format!("{} is empty", path.display())),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        },
        (None, None) => Ok(None),
    }
}

fn default_header() -> String {
    "Authorization".into()
}

fn default_timeout() -> Humantime {
    Humantime(std::time::Duration::from_secs(10))
}

/// The problems of `credentials` on an upstream whose keys start with `at`
/// (`upstreams[0].credentials`); `stdio` says whether it is a stdio upstream.
pub(crate) fn credentials_issues(credentials: &CredentialsConfig, at: &str, stdio: bool) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut push = |key: &str, message: String| {
        issues.push(ConfigIssue {
            path: if key.is_empty() {
                at.to_owned()
            } else {
                format!("{at}.{key}")
            },
            message,
        })
    };
    if stdio && !matches!(credentials, CredentialsConfig::None {}) {
        push(
            "kind",
            "a stdio upstream takes no credentials (its environment is its credential: use stdio.env)".into(),
        );
    }
    match credentials {
        CredentialsConfig::None {} => {}
        CredentialsConfig::Header(header) => {
            if http::HeaderName::from_bytes(header.header.as_bytes()).is_err() {
                push("header", format!("{:?} is not a header name", header.header));
            }
            match header.value() {
                Ok(value) if http::HeaderValue::from_str(&value).is_err() => {
                    push("value_env", "the value is not a valid header value".into())
                }
                Ok(_) => {}
                Err(why) => push(
                    if header.value_file.is_some() {
                        "value_file"
                    } else {
                        "value_env"
                    },
                    why,
                ),
            }
        }
        CredentialsConfig::ClientCredentials(client) => oauth_client_issues(client, false, &mut push),
        CredentialsConfig::TokenExchange(client) => oauth_client_issues(client, true, &mut push),
    }
    issues
}

/// The problems of an OAuth client's keys (`exchange`: for token exchange).
fn oauth_client_issues(client: &OAuthClientCredential, exchange: bool, push: &mut impl FnMut(&str, String)) {
    if let Err(why) = check_issuer(&client.issuer) {
        push("issuer", why);
    }
    let secret_key = if client.client_secret_file.is_some() {
        "client_secret_file"
    } else {
        "client_secret_env"
    };
    match (&client.client_id, client.secret()) {
        (_, Err(why)) => push(secret_key, why),
        (Some(id), Ok(None)) => push(
            secret_key,
            format!("client {id:?} needs a secret: `client_secret_env` or `client_secret_file`"),
        ),
        (None, Ok(Some(_))) => push("client_id", "a client secret needs its `client_id`".into()),
        _ => {}
    }
    if let Some(resource) = &client.resource
        && url::Url::parse(resource).is_err()
    {
        push("resource", format!("{resource:?} is not a URL"));
    }
    if client.audience.is_some() && !exchange {
        push("audience", "only `kind = \"token_exchange\"` sends an audience".into());
    }
    if let Some(issue) = client.ca.as_deref().and_then(|ca| super::tls::ca_issue(ca, "ca")) {
        push("ca", issue.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CredentialsConfig, String> {
        toml::from_str::<CredentialsConfig>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn kinds_and_their_keys() {
        assert_eq!(parse("kind = \"none\""), Ok(CredentialsConfig::None {}));
        assert!(parse("kind = \"none\"\nvalue_env = \"K\"").is_err());
        let header = parse("kind = \"header\"\nvalue_env = \"K\"\nprefix = \"Bearer \"").unwrap();
        let CredentialsConfig::Header(header) = header else {
            panic!("{header:?}")
        };
        assert_eq!(header.header, "Authorization");
        let client =
            parse("kind = \"client_credentials\"\nissuer = \"https://as.example\"\nclient_id = \"c\"").unwrap();
        assert!(matches!(client, CredentialsConfig::ClientCredentials(c) if c.timeout.0.as_secs() == 10));
        assert!(parse("kind = \"token_exchange\"\nissuer = \"https://as.example\"").is_ok());
        assert!(parse("kind = \"passthrough\"").is_err());
        assert!(parse("kind = \"header\"\nvalu_env = \"K\"").is_err());
    }

    #[test]
    fn issues_name_their_key() {
        let at = "upstreams[0].credentials";
        let cases: &[(&str, bool, &[&str])] = &[
            ("kind = \"none\"", false, &[]),
            ("kind = \"none\"", true, &[]),
            (
                "kind = \"header\"\nvalue_env = \"ERAGATE_TEST_UNSET_VARIABLE\"",
                false,
                &["value_env"],
            ),
            ("kind = \"header\"", false, &["value_env"]),
            (
                "kind = \"header\"\nvalue_file = \"/nonexistent/eragate\"",
                false,
                &["value_file"],
            ),
            (
                "kind = \"header\"\nheader = \"bad header\"\nvalue_env = \"PATH\"",
                false,
                &["header"],
            ),
            ("kind = \"header\"\nvalue_env = \"PATH\"", true, &["kind"]),
            (
                "kind = \"client_credentials\"\nissuer = \"http://as.example\"",
                false,
                &["issuer"],
            ),
            (
                "kind = \"client_credentials\"\nissuer = \"https://as.example\"\nclient_id = \"c\"",
                false,
                &["client_secret_env"],
            ),
            (
                "kind = \"client_credentials\"\nissuer = \"https://as.example\"\nclient_secret_env = \"PATH\"",
                false,
                &["client_id"],
            ),
            (
                "kind = \"client_credentials\"\nissuer = \"https://as.example\"\naudience = \"x\"",
                false,
                &["audience"],
            ),
            (
                "kind = \"token_exchange\"\nissuer = \"https://as.example\"\naudience = \"x\"",
                false,
                &[],
            ),
        ];
        for (text, stdio, keys) in cases {
            let config = parse(text).unwrap();
            let found: Vec<String> = credentials_issues(&config, at, *stdio)
                .into_iter()
                .map(|i| i.path)
                .collect();
            let expected: Vec<String> = keys.iter().map(|k| format!("{at}.{k}")).collect();
            assert_eq!(found, expected, "{text:?}");
        }
    }
}
