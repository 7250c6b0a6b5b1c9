//! `[auth.server]`: eragate's own OAuth 2.1 authorization server (off by default):
//! its issuer, token lifetimes, who logs in, the static clients, the registration
//! switches and the storage; and the checks of it that types alone cannot make.

use std::collections::HashMap;
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
    pub(crate) issuer: Option<String>,
    /// Who logs in: `local` (the `users` list) or `oidc` (brokered to the OpenID
    /// provider of `[auth.server.oidc]`). Default `local`.
    #[serde(default)]
    pub login: LoginSource,
    /// `[auth.server.oidc]`: the upstream OpenID provider of `login = "oidc"`.
    #[serde(default)]
    pub(crate) oidc: Option<OidcLogin>,
    /// `[[auth.server.users]]`: local users and their Argon2id password hashes.
    #[serde(default)]
    pub users: Vec<LocalUser>,
    /// `[[auth.server.clients]]`: pre-registered clients.
    #[serde(default)]
    pub(crate) clients: Vec<StaticClient>,
    /// Scopes clients may ask for (advertised in the metadata). Default none: any
    /// scope the resource advertises.
    #[serde(default)]
    pub(crate) scopes_supported: Vec<String>,
    /// Whether `offline_access` may be asked for (and refresh tokens issued for it
    /// to confidential clients). Default false; public clients always get refresh tokens
    /// rotated on every use.
    #[serde(default)]
    pub(crate) offline_access: bool,
    /// Lifetime of an access token. Default 10 min.
    #[serde(default = "default_access_lifetime")]
    pub(crate) access_token_lifetime: Humantime,
    /// Lifetime of a refresh token (each rotation starts it again). Default 30 days.
    #[serde(default = "default_refresh_lifetime")]
    pub(crate) refresh_token_lifetime: Humantime,
    /// Lifetime of an authorization code. Default 60 s.
    #[serde(default = "default_code_lifetime")]
    pub(crate) code_lifetime: Humantime,
    /// How often a new signing key is made; the old one stays in the JWKS until
    /// the last token it signed has expired. Default 24 h.
    #[serde(default = "default_key_rotation")]
    pub(crate) key_rotation: Humantime,
    /// Dynamic Client Registration (RFC 7591) at `/oauth/register`. Default on.
    #[serde(default = "default_true")]
    pub(crate) dynamic_registration: bool,
    /// Registrations accepted per minute (all clients together). Default 20.
    #[serde(default = "default_registrations_per_minute")]
    pub(crate) registrations_per_minute: u32,
    /// Registrations accepted per minute from one client address (an IPv6 client
    /// by its /64; behind `listen.trusted_proxies`, the real client's). Default 5.
    #[serde(default = "default_registrations_per_minute_per_ip")]
    pub(crate) registrations_per_minute_per_ip: u32,
    /// A dynamically registered client never used for this long is forgotten. Default 7 days.
    #[serde(default = "default_registration_expiry")]
    pub(crate) registration_expiry: Humantime,
    /// Client ID Metadata Documents (https `client_id` URLs). Default on.
    #[serde(default = "default_true")]
    pub(crate) client_metadata_documents: bool,
    /// A PEM bundle trusted instead of the public roots when fetching client
    /// metadata documents (a private PKI, or a test CA). Default: the public roots.
    #[serde(default)]
    pub(crate) client_metadata_ca: Option<std::path::PathBuf>,
    /// Hosts whose metadata documents may be fetched although they resolve to
    /// loopback or private addresses (tests only; the SSRF guard refuses them
    /// otherwise). Default none.
    #[serde(default)]
    pub(crate) client_metadata_private_hosts: Vec<String>,
    /// Where clients, codes, refresh-token families, consents and signing keys are
    /// kept: `memory` (this process; forgotten on restart: tests and development),
    /// `sqlite` (the file `sqlite_path`: a single instance that survives restarts)
    /// or `redis` (`redis_url`: several replicas sharing every grant). Default `memory`.
    #[serde(default)]
    pub(crate) storage: StorageKind,
    /// The SQLite file of `storage = "sqlite"`, created (mode 0600: it holds the
    /// signing keys) if absent. Required with it.
    #[serde(default)]
    pub(crate) sqlite_path: Option<std::path::PathBuf>,
    /// Deprecated: write `[redis] url`. The Redis server of `storage = "redis"`:
    /// `redis://[:PASSWORD@]HOST:PORT[/DB]` (plain TCP), used when `[redis]` is not set.
    #[serde(default)]
    pub(crate) redis_url: Option<String>,
    /// Prefix of every key the authorization server writes in Redis. Default
    /// `[redis] key_prefix` followed by `as:` (`eragate:as:`).
    #[serde(default)]
    pub(crate) redis_key_prefix: Option<String>,
    /// How long one Redis command may take before the store is taken as down (the
    /// request then fails with `temporarily_unavailable`). Default `[redis] timeout`, else 2 s.
    #[serde(default)]
    pub(crate) redis_timeout: Option<Humantime>,
    /// Failed sign-ins allowed per user name, and per client IP, within
    /// `login_attempts_window`; past it the login page answers 429 "too many
    /// attempts" until the window ends. Counted in Redis with `storage = "redis"`
    /// (across replicas), else in this process. 0: no limit. Default 5.
    #[serde(default = "default_login_attempts")]
    pub(crate) login_attempts: u32,
    /// The window of `login_attempts` (a fixed window per user and per IP). Default 15 min.
    #[serde(default = "default_login_attempts_window")]
    pub(crate) login_attempts_window: Humantime,
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
            registrations_per_minute_per_ip: default_registrations_per_minute_per_ip(),
            registration_expiry: default_registration_expiry(),
            client_metadata_documents: true,
            client_metadata_ca: None,
            client_metadata_private_hosts: Vec::new(),
            oidc: None,
            storage: StorageKind::Memory,
            sqlite_path: None,
            redis_url: None,
            redis_key_prefix: None,
            redis_timeout: None,
            login_attempts: default_login_attempts(),
            login_attempts_window: default_login_attempts_window(),
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
    /// The OpenID provider of `[auth.server.oidc]` (eragate is its confidential client).
    Oidc,
}

/// `[auth.server] storage`: where the authorization server's state is kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageKind {
    /// In this process only.
    #[default]
    Memory,
    /// A SQLite file (`sqlite_path`).
    Sqlite,
    /// A Redis server (`redis_url`), shared by replicas.
    Redis,
}

/// `[auth.server.oidc]`: the OpenID provider users sign in at when `login = "oidc"`.
/// eragate is its confidential client, with the redirect URI `ISSUER-ORIGIN/oauth/callback`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcLogin {
    /// The provider's issuer (https, or http on loopback); its OpenID discovery
    /// document is read from `ISSUER/.well-known/openid-configuration`. Required.
    pub(crate) issuer: String,
    /// eragate's client id at the provider. Required.
    pub(crate) client_id: String,
    /// eragate's client secret, in the file. Give this or `client_secret_env`.
    #[serde(default)]
    pub(crate) client_secret: Option<String>,
    /// An environment variable holding the client secret, read at start.
    #[serde(default)]
    pub(crate) client_secret_env: Option<String>,
    /// Scopes asked of the provider besides `openid`. Default none.
    #[serde(default)]
    pub(crate) scopes: Vec<String>,
    /// The ID token claim that becomes the principal. Default `sub`.
    #[serde(default = "default_subject_claim")]
    pub(crate) subject_claim: String,
    /// ID token signature algorithms accepted. Default RS256, ES256, EdDSA.
    #[serde(default = "default_oidc_algorithms")]
    pub(crate) algorithms: Vec<String>,
    /// A PEM bundle trusted instead of the public roots toward the provider. Default: the public roots.
    #[serde(default)]
    pub(crate) ca: Option<std::path::PathBuf>,
}

impl OidcLogin {
    /// The client secret: the file's, else the environment variable's (`None` if unset).
    pub(crate) fn secret(&self) -> Option<String> {
        match (&self.client_secret, &self.client_secret_env) {
            (Some(secret), _) => Some(secret.clone()),
            (None, Some(name)) => std::env::var(name).ok().filter(|v| !v.is_empty()),
            (None, None) => None,
        }
    }
}

fn default_subject_claim() -> String {
    "sub".into()
}
fn default_oidc_algorithms() -> Vec<String> {
    ["RS256", "ES256", "EdDSA"].map(String::from).to_vec()
}
fn default_login_attempts() -> u32 {
    5
}
fn default_login_attempts_window() -> Humantime {
    Humantime(Duration::from_secs(15 * 60))
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
    pub(crate) client_id: String,
    /// Its exact redirect URIs (a loopback `http://127.0.0.1` or `http://[::1]` one
    /// matches any port, RFC 8252).
    pub(crate) redirect_uris: Vec<String>,
    /// Hex SHA-256 of the client secret: a confidential client. Absent: a public one.
    #[serde(default)]
    pub(crate) secret_sha256: Option<String>,
    /// The name shown on the consent page. Default: the client id.
    #[serde(default)]
    pub(crate) client_name: Option<String>,
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
fn default_registrations_per_minute_per_ip() -> u32 {
    5
}
fn default_registration_expiry() -> Humantime {
    Humantime(Duration::from_secs(7 * 24 * 3600))
}

/// Passwords published with eragate (`config/auth-server.toml`, the README's
/// examples): fine on one's own machine, refused where others can reach the login.
const EXAMPLE_PASSWORDS: &[&str] = &["change-me"];

/// Why the login page may be reachable from other machines, if it may: the
/// listener binds a non-loopback address, or the issuer (where clients send users
/// to sign in) names a non-loopback host.
fn exposure(server: &AuthServerConfig, listen: &ListenConfig) -> Option<String> {
    if !listen.address.ip().is_loopback() {
        return Some(format!("listen.address is {}", listen.address));
    }
    let issuer = server.issuer(listen);
    let loopback = url::Url::parse(&issuer).ok().is_some_and(|url| match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    });
    (!loopback).then(|| format!("the issuer is {issuer}"))
}

/// What is wrong with a user's `password_argon2`, if anything: not an Argon2id PHC
/// string with usable parameters; the hash of the empty password (which never
/// signs in); or, when the login is `exposed` (why), a published example password.
/// Each password tried costs one Argon2 verification (~20 ms) per hash, remembered
/// for the life of the process.
fn password_issue(hash: &str, exposed: Option<&str>) -> Option<String> {
    use argon2::PasswordVerifier;
    let remedy = "make one with `echo NEW-PASSWORD | eragate hash-password`";
    let parsed = match argon2::PasswordHash::new(hash) {
        Ok(parsed) => parsed,
        Err(error) => {
            return Some(format!(
                "is not an Argon2id PHC string (\"$argon2id$v=19$m=...,t=...,p=...$SALT$HASH\"): {error}; {remedy}"
            ));
        }
    };
    if parsed.algorithm.as_str() != "argon2id" {
        return Some(format!(
            "is an {} hash; only argon2id is accepted: {remedy}",
            parsed.algorithm.as_str()
        ));
    }
    if parsed.salt.is_none() || parsed.hash.is_none() {
        return Some(format!("lacks its salt or its hash: {remedy}"));
    }
    if let Err(error) = argon2::Params::try_from(&parsed) {
        return Some(format!("has unusable Argon2 parameters ({error}): {remedy}"));
    }
    // The configuration is checked more than once at start (the file, then with the
    // command line) and at each reload: each password is tried against a hash once.
    static TRIED: std::sync::LazyLock<std::sync::Mutex<HashMap<(String, &'static str), bool>>> =
        std::sync::LazyLock::new(Default::default);
    let verifies = |password: &'static str| {
        let key = (hash.to_owned(), password);
        if let Some(&known) = TRIED.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return known;
        }
        let verified = argon2::Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        TRIED.lock().unwrap_or_else(|e| e.into_inner()).insert(key, verified);
        verified
    };
    if verifies("") {
        return Some(format!(
            "is the hash of the empty password, which never signs in: {remedy}"
        ));
    }
    let exposed = exposed?;
    EXAMPLE_PASSWORDS.iter().find(|p| verifies(p)).map(|example| {
        format!(
            "is the hash of the published example password {example:?}, accepted only while the \
             login is reachable from this machine alone ({exposed}): {remedy}"
        )
    })
}

/// The problems of `[auth.server]`.
pub(crate) fn server_issues(
    server: &AuthServerConfig,
    listen: &ListenConfig,
    oauth_issuer: Option<&str>,
) -> Vec<ConfigIssue> {
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
    if server.login == LoginSource::Local && server.users.is_empty() {
        push(
            "auth.server.users".into(),
            "nobody can sign in (login = \"local\" and no user): add one with \
             --user \"NAME:$(echo PASSWORD | eragate hash-password)\", or [[auth.server.users]] \
             with name and password_argon2"
                .into(),
        );
    }
    let exposed = exposure(server, listen);
    for (i, user) in server.users.iter().enumerate() {
        if user.name.is_empty() || user.name.contains('#') {
            push(
                format!("auth.server.users[{i}].name"),
                "must be non-empty and without '#'".into(),
            );
        }
        if let Some(why) = password_issue(&user.password_argon2, exposed.as_deref()) {
            push(format!("auth.server.users[{i}].password_argon2"), why);
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
    match server.storage {
        StorageKind::Memory => {}
        StorageKind::Sqlite => match &server.sqlite_path {
            None => push(
                "auth.server.sqlite_path".into(),
                "required with storage = \"sqlite\"".into(),
            ),
            Some(path) => {
                let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
                if parent.is_some_and(|p| !p.is_dir()) {
                    push(
                        "auth.server.sqlite_path".into(),
                        format!("{}: its directory does not exist", path.display()),
                    );
                }
            }
        },
        // Whether a Redis server is named at all is checked with `[redis]` (super::redis).
        StorageKind::Redis => {
            if let Some(Err(why)) = server.redis_url.as_deref().map(super::RedisEndpoint::parse) {
                push("auth.server.redis_url".into(), why);
            }
        }
    }
    if server.redis_timeout.as_ref().is_some_and(|t| t.0.is_zero()) {
        push("auth.server.redis_timeout".into(), "must be longer than 0s".into());
    }
    if server.login_attempts > 0 && server.login_attempts_window.0.is_zero() {
        push(
            "auth.server.login_attempts_window".into(),
            "must be longer than 0s".into(),
        );
    }
    match (server.login, &server.oidc) {
        (LoginSource::Oidc, None) => push(
            "auth.server.oidc".into(),
            "login = \"oidc\" needs [auth.server.oidc] (issuer, client_id, client_secret)".into(),
        ),
        (LoginSource::Local, Some(_)) => push(
            "auth.server.login".into(),
            "[auth.server.oidc] is set: say login = \"oidc\" (or remove it)".into(),
        ),
        (_, Some(oidc)) => {
            if let Err(why) = super::check_issuer(&oidc.issuer) {
                push("auth.server.oidc.issuer".into(), why);
            }
            if oidc.client_id.is_empty() {
                push("auth.server.oidc.client_id".into(), "must not be empty".into());
            }
            if oidc.secret().is_none() {
                push(
                    "auth.server.oidc.client_secret".into(),
                    "give client_secret, or client_secret_env naming a set variable".into(),
                );
            }
            if oidc.subject_claim.is_empty() {
                push("auth.server.oidc.subject_claim".into(), "must not be empty".into());
            }
            if let Some(unknown) = oidc
                .algorithms
                .iter()
                .find(|a| crate::auth::jwt::algorithms(std::slice::from_ref(a)).is_empty())
            {
                push(
                    "auth.server.oidc.algorithms".into(),
                    format!("unknown algorithm {unknown:?}"),
                );
            }
            if let Some(ca) = &oidc.ca
                && !ca.is_file()
            {
                push(
                    "auth.server.oidc.ca".into(),
                    format!("{} is not a readable file", ca.display()),
                );
            }
        }
        (LoginSource::Local, None) => {}
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

    /// An Argon2id hash of `password` (made here: `hash_password` refuses the empty one).
    fn hash(password: &str) -> String {
        use argon2::PasswordHasher;
        argon2::Argon2::default()
            .hash_password(password.as_bytes())
            .expect("a hash")
            .to_string()
    }

    fn with_user(password_argon2: String) -> AuthServerConfig {
        AuthServerConfig {
            users: vec![LocalUser {
                name: "alice".into(),
                password_argon2,
            }],
            ..AuthServerConfig::default()
        }
    }

    #[test]
    fn passwords_nobody_should_sign_in_with_are_refused() {
        let public = ListenConfig {
            address: "0.0.0.0:8080".parse().expect("addr"),
            public_url: Some("https://mcp.example.com".into()),
            ..ListenConfig::default()
        };
        // Bound to loopback behind a proxy that serves the world.
        let proxied = ListenConfig {
            public_url: Some("https://mcp.example.com".into()),
            ..ListenConfig::default()
        };
        let loopback = ListenConfig::default();
        let example = with_user(hash("change-me"));
        let own = with_user(hash("a password of her own"));
        // (server, listener, the issues' paths)
        let users = "auth.server.users";
        let hash_key = "auth.server.users[0].password_argon2";
        let cases: Vec<(AuthServerConfig, &ListenConfig, Vec<&str>)> = vec![
            (own.clone(), &public, vec![]),
            (example.clone(), &loopback, vec![]),
            (example.clone(), &public, vec![hash_key]),
            (example, &proxied, vec![hash_key]),
            (with_user(hash("")), &loopback, vec![hash_key]),
            (
                with_user("$argon2id$v=19$m=19456,t=2,p=1$garbage".into()),
                &loopback,
                vec![hash_key],
            ),
            (
                with_user(hash("x").replace("argon2id", "argon2i")),
                &loopback,
                vec![hash_key],
            ),
            (AuthServerConfig::default(), &loopback, vec![users]),
            (
                AuthServerConfig {
                    login: LoginSource::Oidc,
                    ..AuthServerConfig::default()
                },
                &loopback,
                vec!["auth.server.oidc"],
            ),
        ];
        for (server, listen, expected) in cases {
            let issues = server_issues(&server, listen, None);
            let found: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
            assert_eq!(found, expected, "{:?} on {}: {issues:?}", server.users, listen.address);
        }
    }

    #[test]
    fn mistakes_name_their_keys() {
        let good = with_user(hash("wonderland"));
        assert!(paths(&good, None).is_empty(), "{:?}", paths(&good, None));
        let cases: Vec<(&str, AuthServerConfig, Option<&str>)> = vec![
            (
                "auth.server.issuer",
                AuthServerConfig {
                    issuer: Some("http://auth.example.com".into()),
                    ..good.clone()
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
                    ..good.clone()
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
                    ..good.clone()
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
                    ..good.clone()
                },
                None,
            ),
            (
                "auth.server.code_lifetime",
                AuthServerConfig {
                    code_lifetime: Humantime(Duration::from_secs(3600)),
                    ..good.clone()
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
