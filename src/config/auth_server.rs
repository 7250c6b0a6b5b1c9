//! `[auth.server]`: eragate's own OAuth 2.1 authorization server (off by default):
//! its issuer, token lifetimes, who logs in, the static clients, the registration
//! switches and the storage; and the checks of it that types alone cannot make.

use std::time::Duration;

use serde::Deserialize;

use super::duration::Humantime;
use super::{ConfigIssue, ListenConfig};

/// `[auth.server]`: the built-in authorization server.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthServerConfig {
    /// The issuer identifier, byte-identical in metadata and tokens. Default:
    /// `listen.public_url` (else the listener's URL).
    #[serde(default)]
    pub issuer: Option<String>,
    /// Who logs in: `local` (the `users` list). Default `local`.
    #[serde(default)]
    pub login: LoginSource,
    /// `[[auth.server.users]]`: local users and their Argon2id password hashes.
    #[serde(default)]
    pub users: Vec<LocalUser>,
    /// `[[auth.server.clients]]`: pre-registered clients.
    #[serde(default)]
    pub clients: Vec<StaticClient>,
    /// Scopes clients may ask for (advertised in the metadata). Default none: any
    /// scope the resource advertises.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// Whether `offline_access` may be asked for (and refresh tokens issued for it
    /// to confidential clients). Default false; public clients always get refresh tokens
    /// rotated on every use.
    #[serde(default)]
    pub offline_access: bool,
    /// Lifetime of an access token. Default 10 min.
    #[serde(default = "default_access_lifetime")]
    pub access_token_lifetime: Humantime,
    /// Lifetime of a refresh token (each rotation starts it again). Default 30 days.
    #[serde(default = "default_refresh_lifetime")]
    pub refresh_token_lifetime: Humantime,
    /// Lifetime of an authorization code. Default 60 s.
    #[serde(default = "default_code_lifetime")]
    pub code_lifetime: Humantime,
    /// How often a new signing key is made; the old one stays in the JWKS until
    /// the last token it signed has expired. Default 24 h.
    #[serde(default = "default_key_rotation")]
    pub key_rotation: Humantime,
    /// Dynamic Client Registration (RFC 7591) at `/oauth/register`. Default on.
    #[serde(default = "default_true")]
    pub dynamic_registration: bool,
    /// Registrations accepted per minute (all clients together). Default 20.
    #[serde(default = "default_registrations_per_minute")]
    pub registrations_per_minute: u32,
    /// A dynamically registered client never used for this long is forgotten. Default 7 days.
    #[serde(default = "default_registration_expiry")]
    pub registration_expiry: Humantime,
    /// Client ID Metadata Documents (https `client_id` URLs). Default on.
    #[serde(default = "default_true")]
    pub client_metadata_documents: bool,
    /// A PEM bundle trusted instead of the public roots when fetching client
    /// metadata documents (a private PKI, or a test CA). Default: the public roots.
    #[serde(default)]
    pub client_metadata_ca: Option<std::path::PathBuf>,
    /// Hosts whose metadata documents may be fetched although they resolve to
    /// loopback or private addresses (tests only; the SSRF guard refuses them
    /// otherwise). Default none.
    #[serde(default)]
    pub client_metadata_private_hosts: Vec<String>,
}

impl Default for AuthServerConfig {
    fn default() -> AuthServerConfig {
        AuthServerConfig {
            issuer: None,
            login: LoginSource::Local,
            users: Vec::new(),
            clients: Vec::new(),
            scopes_supported: Vec::new(),
            offline_access: false,
            access_token_lifetime: default_access_lifetime(),
            refresh_token_lifetime: default_refresh_lifetime(),
            code_lifetime: default_code_lifetime(),
            key_rotation: default_key_rotation(),
            dynamic_registration: true,
            registrations_per_minute: default_registrations_per_minute(),
            registration_expiry: default_registration_expiry(),
            client_metadata_documents: true,
            client_metadata_ca: None,
            client_metadata_private_hosts: Vec::new(),
        }
    }
}

impl AuthServerConfig {
    /// The issuer: `issuer`, else the public URL, else the listener's URL.
    pub fn issuer(&self, listen: &ListenConfig) -> String {
        match (&self.issuer, &listen.public_url) {
            (Some(issuer), _) => issuer.clone(),
            (None, Some(public)) => public.trim_end_matches('/').to_owned(),
            (None, None) => format!("http://{}", listen.address),
        }
    }
}

/// Who logs in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoginSource {
    /// The `users` list.
    #[default]
    Local,
}

/// `[[auth.server.users]]`: one local user.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalUser {
    /// The login name; the token's `sub`.
    pub name: String,
    /// The PHC string of an Argon2id hash of the password (`$argon2id$v=19$...`).
    pub password_argon2: String,
}

/// `[[auth.server.clients]]`: a pre-registered client.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticClient {
    /// The client id.
    pub client_id: String,
    /// Its exact redirect URIs (a loopback `http://127.0.0.1` or `http://[::1]` one
    /// matches any port, RFC 8252).
    pub redirect_uris: Vec<String>,
    /// Hex SHA-256 of the client secret: a confidential client. Absent: a public one.
    #[serde(default)]
    pub secret_sha256: Option<String>,
    /// The name shown on the consent page. Default: the client id.
    #[serde(default)]
    pub client_name: Option<String>,
}

fn default_true() -> bool {
    true
}
fn default_access_lifetime() -> Humantime {
    Humantime(Duration::from_secs(600))
}
fn default_refresh_lifetime() -> Humantime {
    Humantime(Duration::from_secs(30 * 24 * 3600))
}
fn default_code_lifetime() -> Humantime {
    Humantime(Duration::from_secs(60))
}
fn default_key_rotation() -> Humantime {
    Humantime(Duration::from_secs(24 * 3600))
}
fn default_registrations_per_minute() -> u32 {
    20
}
fn default_registration_expiry() -> Humantime {
    Humantime(Duration::from_secs(7 * 24 * 3600))
}

/// The problems of `[auth.server]`.
pub fn server_issues(server: &AuthServerConfig, listen: &ListenConfig, oauth_issuer: Option<&str>) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut push = |path: String, message: String| issues.push(ConfigIssue { path, message });
    let issuer = server.issuer(listen);
    if let Err(why) = super::check_issuer(&issuer) {
        push("auth.server.issuer".into(), why);
    }
    if let Some(other) = oauth_issuer
        && other != issuer
    {
        push(
            "auth.oauth.issuer".into(),
            format!("with [auth.server], tokens come from eragate itself: the issuer is {issuer:?}"),
        );
    }
    for (i, user) in server.users.iter().enumerate() {
        if user.name.is_empty() || user.name.contains('#') {
            push(
                format!("auth.server.users[{i}].name"),
                "must be non-empty and without '#'".into(),
            );
        }
        if !user.password_argon2.starts_with("$argon2id$") {
            push(
                format!("auth.server.users[{i}].password_argon2"),
                "must be an Argon2id PHC string (\"$argon2id$v=19$...\"): `eragate hash-password`".into(),
            );
        }
    }
    for (i, client) in server.clients.iter().enumerate() {
        let at = |key: &str| format!("auth.server.clients[{i}].{key}");
        if client.client_id.is_empty() || client.client_id.starts_with("https://") {
            push(
                at("client_id"),
                "must be non-empty and not an https URL (those are metadata documents)".into(),
            );
        }
        if client.redirect_uris.is_empty() {
            push(at("redirect_uris"), "name at least one redirect URI".into());
        }
        for (j, uri) in client.redirect_uris.iter().enumerate() {
            match url::Url::parse(uri) {
                Ok(url) if url.fragment().is_none() => {}
                _ => push(
                    format!("auth.server.clients[{i}].redirect_uris[{j}]"),
                    "must be an absolute URI without fragment".into(),
                ),
            }
        }
        if let Some(hex) = &client.secret_sha256
            && (hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            push(
                at("secret_sha256"),
                "must be 64 hex digits: `printf %s \"$SECRET\" | sha256sum`".into(),
            );
        }
    }
    if let Some(ca) = &server.client_metadata_ca
        && !ca.is_file()
    {
        push(
            "auth.server.client_metadata_ca".into(),
            format!("{} is not a readable file", ca.display()),
        );
    }
    for (key, value) in [
        ("access_token_lifetime", server.access_token_lifetime.0),
        ("code_lifetime", server.code_lifetime.0),
        ("key_rotation", server.key_rotation.0),
        ("refresh_token_lifetime", server.refresh_token_lifetime.0),
    ] {
        if value.is_zero() {
            push(format!("auth.server.{key}"), "must be longer than 0s".into());
        }
    }
    if server.code_lifetime.0 > Duration::from_secs(600) {
        push(
            "auth.server.code_lifetime".into(),
            "at most 10m (RFC 6749 §4.1.2: codes are short-lived)".into(),
        );
    }
    if server.key_rotation.0 < server.access_token_lifetime.0 {
        push(
            "auth.server.key_rotation".into(),
            "must be at least access_token_lifetime".into(),
        );
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(server: &AuthServerConfig, oauth: Option<&str>) -> Vec<String> {
        server_issues(server, &ListenConfig::default(), oauth)
            .into_iter()
            .map(|i| i.path)
            .collect()
    }

    #[test]
    fn mistakes_name_their_keys() {
        let good = AuthServerConfig::default();
        assert!(paths(&good, None).is_empty(), "{:?}", paths(&good, None));
        let cases: Vec<(&str, AuthServerConfig, Option<&str>)> = vec![
            (
                "auth.server.issuer",
                AuthServerConfig {
                    issuer: Some("http://auth.example.com".into()),
                    ..AuthServerConfig::default()
                },
                None,
            ),
            ("auth.oauth.issuer", good.clone(), Some("https://other.example")),
            (
                "auth.server.users[0].password_argon2",
                AuthServerConfig {
                    users: vec![LocalUser {
                        name: "alice".into(),
                        password_argon2: "plain".into(),
                    }],
                    ..AuthServerConfig::default()
                },
                None,
            ),
            (
                "auth.server.clients[0].secret_sha256",
                AuthServerConfig {
                    clients: vec![StaticClient {
                        client_id: "c".into(),
                        redirect_uris: vec!["http://127.0.0.1/cb".into()],
                        secret_sha256: Some("abc".into()),
                        client_name: None,
                    }],
                    ..AuthServerConfig::default()
                },
                None,
            ),
            (
                "auth.server.clients[0].redirect_uris",
                AuthServerConfig {
                    clients: vec![StaticClient {
                        client_id: "c".into(),
                        redirect_uris: vec![],
                        secret_sha256: None,
                        client_name: None,
                    }],
                    ..AuthServerConfig::default()
                },
                None,
            ),
            (
                "auth.server.code_lifetime",
                AuthServerConfig {
                    code_lifetime: Humantime(Duration::from_secs(3600)),
                    ..AuthServerConfig::default()
                },
                None,
            ),
        ];
        for (expected, server, oauth) in cases {
            let found = paths(&server, oauth);
            assert_eq!(found, [expected], "{expected}");
        }
    }
}
