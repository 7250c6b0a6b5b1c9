//! The `[auth]` part of the configuration model: static bearer tokens and the
//! OAuth protected resource (`[auth.oauth]`), every key with its default.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::duration::Humantime;

/// `[auth]`: bearer tokens clients must present. With none configured (the
/// default) every client is admitted as the same anonymous principal.
#[derive(Clone, Debug, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// `[[auth.tokens]]`: each token and the principal it names. Several tokens
    /// may name one principal (rotation).
    pub(crate) tokens: Vec<TokenConfig>,
    /// `[auth.oauth]`: eragate as an OAuth 2.1 protected resource of an
    /// existing authorization server. Default: off.
    pub oauth: Option<OAuthConfig>,
    /// `[auth.server]`: eragate's own authorization server, whose tokens eragate
    /// then accepts as a protected resource. Default: off.
    pub server: Option<super::auth_server::AuthServerConfig>,
}

impl AuthConfig {
    /// The environment variables eragate reads secrets from (tokens' `env`,
    /// introspection's and `[auth.server.oidc]`'s `client_secret_env`): stdio children never inherit them
    /// through a pattern.
    pub(crate) fn secret_env_names(&self) -> Vec<String> {
        let tokens = self.tokens.iter().filter_map(|token| match &token.source {
            TokenSource::Env(name) => Some(name.clone()),
            TokenSource::Sha256(_) => None,
        });
        let secret = self
            .oauth
            .as_ref()
            .and_then(|oauth| oauth.introspection.as_ref())
            .and_then(|introspection| introspection.client_secret_env.clone());
        let broker_secret = self
            .server
            .as_ref()
            .and_then(|server| server.oidc.as_ref())
            .and_then(|oidc| oidc.client_secret_env.clone());
        tokens.chain(secret).chain(broker_secret).collect()
    }
}

/// `[auth.oauth]`: access tokens from the authorization server `issuer`,
/// validated by eragate (the resource server) for its own canonical URI.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The authorization server's issuer identifier, compared exactly with a
    /// token's `iss`; its metadata is found by RFC 8414, then OpenID discovery.
    /// `https://` (or `http://` on a loopback host). Required.
    pub issuer: String,
    /// The canonical URI of the first (or only) MCP path, which tokens' `aud`
    /// must contain. Default: `listen.public_url` (else the listener's URL) + the path.
    #[serde(default)]
    pub(crate) resource: Option<String>,
    /// Scopes advertised in the protected resource metadata. Default: `required_scopes`.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// Scopes every token must carry; a token without them gets 403
    /// `insufficient_scope`. Default none.
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// Signature algorithms accepted, from `RS256`, `ES256`, `EdDSA`, `PS256`,
    /// `ES384`, `RS384`, `RS512`. Default `["RS256", "ES256", "EdDSA"]`.
    #[serde(default = "default_algorithms")]
    pub(crate) algorithms: Vec<String>,
    /// Clock skew tolerated on `exp` and `nbf`. Default 30 s.
    #[serde(default = "default_leeway")]
    pub(crate) leeway: Humantime,
    /// Whether a JWT must say it is an access token with the header `typ: at+jwt`
    /// (RFC 9068 §4; `application/at+jwt` too). Turn off only for an issuer whose
    /// access tokens carry `typ: JWT`; their `aud` is still checked. Default true.
    #[serde(default = "default_true")]
    pub(crate) require_at_jwt: bool,
    /// Shortest interval between two JWKS fetches caused by an unknown `kid`
    /// (so forged key ids cannot hammer the issuer). Default 30 s.
    #[serde(default = "default_jwks_min_refetch")]
    pub(crate) jwks_min_refetch: Humantime,
    /// PEM bundle of the CA certificates trusted for the authorization server
    /// (discovery, JWKS, introspection) instead of the public roots compiled into
    /// eragate; for a private CA. Default: the public roots.
    #[serde(default)]
    pub(crate) ca: Option<std::path::PathBuf>,
    /// How long one request to the authorization server may take. Default 5 s.
    #[serde(default = "default_oauth_timeout")]
    pub(crate) timeout: Humantime,
    /// `resource_name` in the protected resource metadata. Default none.
    #[serde(default)]
    pub(crate) resource_name: Option<String>,
    /// `resource_documentation` (a URL) in the protected resource metadata. Default none.
    #[serde(default)]
    pub(crate) resource_documentation: Option<String>,
    /// `[auth.oauth.introspection]`: opaque tokens checked by RFC 7662. Default: off
    /// (only JWT access tokens are accepted).
    #[serde(default)]
    pub(crate) introspection: Option<IntrospectionConfig>,
    /// `[auth.oauth.scopes_for]`: scopes a method (`"tools/call"`) or one tool, prompt
    /// or resource (`"tools/call:NAME"`, `"prompts/get:NAME"`, `"resources/read:URI"`;
    /// a name ending in `*` is a prefix) needs on top of `required_scopes`. With a rule
    /// naming a tool, `tools/list` shows each token only the tools it may call. Default none.
    #[serde(default)]
    pub(crate) scopes_for: BTreeMap<String, Vec<String>>,
}

/// `[auth.oauth.introspection]`: eragate's own client at the authorization server,
/// for asking about opaque tokens.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IntrospectionConfig {
    /// eragate's client id at the authorization server. Required.
    pub(crate) client_id: String,
    /// The client secret, in the file. Give this or `client_secret_env`.
    #[serde(default)]
    pub(crate) client_secret: Option<String>,
    /// An environment variable holding the client secret, read at start.
    #[serde(default)]
    pub(crate) client_secret_env: Option<String>,
    /// The introspection endpoint. Default: the issuer metadata's `introspection_endpoint`.
    #[serde(default)]
    pub(crate) endpoint: Option<String>,
    /// Longest time an active answer is reused (it is never reused past the token's
    /// `exp`). Default 5 min.
    #[serde(default = "default_introspection_cache")]
    pub(crate) cache_max: Humantime,
    /// Most answers cached. Default 10 000.
    #[serde(default = "default_introspection_entries")]
    pub(crate) max_entries: usize,
}

fn default_introspection_cache() -> Humantime {
    Humantime(Duration::from_secs(300))
}
fn default_introspection_entries() -> usize {
    10_000
}

impl IntrospectionConfig {
    /// The client secret: the file's, else the environment variable's (`None` if unset).
    pub(crate) fn secret(&self) -> Option<String> {
        match (&self.client_secret, &self.client_secret_env) {
            (Some(secret), _) => Some(secret.clone()),
            (None, Some(name)) => std::env::var(name).ok().filter(|v| !v.is_empty()),
            (None, None) => None,
        }
    }
}

fn default_algorithms() -> Vec<String> {
    ["RS256", "ES256", "EdDSA"].map(String::from).to_vec()
}
fn default_true() -> bool {
    true
}

fn default_leeway() -> Humantime {
    Humantime(Duration::from_secs(30))
}
fn default_jwks_min_refetch() -> Humantime {
    Humantime(Duration::from_secs(30))
}
fn default_oauth_timeout() -> Humantime {
    Humantime(Duration::from_secs(5))
}

impl OAuthConfig {
    /// `[auth.oauth]` for `issuer` with every other key at its default.
    pub fn for_issuer(issuer: &str) -> OAuthConfig {
        OAuthConfig {
            issuer: issuer.to_owned(),
            resource: None,
            scopes_supported: Vec::new(),
            required_scopes: Vec::new(),
            algorithms: default_algorithms(),
            leeway: default_leeway(),
            require_at_jwt: true,
            jwks_min_refetch: default_jwks_min_refetch(),
            ca: None,
            timeout: default_oauth_timeout(),
            resource_name: None,
            resource_documentation: None,
            introspection: None,
            scopes_for: BTreeMap::new(),
        }
    }

    /// The scopes the metadata advertises: `scopes_supported`, else `required_scopes`
    /// and those of `scopes_for`.
    pub(crate) fn advertised_scopes(&self) -> Vec<String> {
        if !self.scopes_supported.is_empty() {
            return self.scopes_supported.clone();
        }
        let mut scopes = self.required_scopes.clone();
        for scope in self.scopes_for.values().flatten() {
            if !scopes.contains(scope) {
                scopes.push(scope.clone());
            }
        }
        scopes
    }
}

/// `[[auth.tokens]]`: `principal` and exactly one of `sha256` (the hex SHA-256
/// of the token, so the file holds no secret) or `env` (a variable holding the token).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "RawToken")]
pub(crate) struct TokenConfig {
    /// Who the token's bearer is: the partition of their upstream sessions, the
    /// owner of their legacy sessions and `requestState`.
    pub(crate) principal: String,
    /// Where the token comes from.
    pub(crate) source: TokenSource,
}

/// Where a configured token comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenSource {
    /// Its SHA-256 digest.
    Sha256([u8; 32]),
    /// The environment variable holding it, read at start.
    Env(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    principal: String,
    sha256: Option<String>,
    env: Option<String>,
}

impl TryFrom<RawToken> for TokenConfig {
    type Error = String;

    fn try_from(raw: RawToken) -> Result<TokenConfig, String> {
        if raw.principal.is_empty() {
            return Err("principal must not be empty".into());
        }
        let source = match (raw.sha256, raw.env) {
            (Some(hex), None) => TokenSource::Sha256(parse_digest(&hex)?),
            (None, Some(env)) if !env.is_empty() => TokenSource::Env(env),
            (None, Some(_)) => return Err("env must name an environment variable".into()),
            _ => return Err("give exactly one of `sha256` (hex SHA-256 of the token) or `env`".into()),
        };
        Ok(TokenConfig {
            principal: raw.principal,
            source,
        })
    }
}

fn parse_digest(hex: &str) -> Result<[u8; 32], String> {
    let invalid = || "sha256 must be 64 hex digits: `printf %s \"$TOKEN\" | sha256sum`".to_owned();
    let hex = hex.trim();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid());
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(hex.as_bytes().chunks(2)) {
        let text = std::str::from_utf8(pair).map_err(|_| invalid())?;
        *byte = u8::from_str_radix(text, 16).map_err(|_| invalid())?;
    }
    Ok(digest)
}
