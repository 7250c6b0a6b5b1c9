//! Who a client is. Every request runs as a [`Principal`]: the anonymous one when
//! authentication is off, otherwise the owner of the bearer token the client
//! presented in its `Authorization` header: a static `[[auth.tokens]]` entry
//! (`tokens`), or an OAuth access token from the configured authorization
//! server, validated by eragate as a protected resource (`resource`), whose
//! principal is its `iss` and `sub`. A client's token is never passed on to an
//! upstream (upstream links build their own headers), and a token in the query
//! string is refused.
//!
//! The principal is bound into everything that outlives a request: pooled
//! upstream sessions are partitioned by it, legacy session ids and
//! `requestState` seal it, so one client can never resume another's.
//!
//! Credentials toward upstreams (a static header, client credentials, token
//! exchange) are the upstream's own: `crate::upstream::credentials`. An OAuth
//! principal carries its access token only so that it can be exchanged there.

pub(crate) mod discovery;
pub(crate) mod fetch;
pub mod grants;
pub(crate) mod introspect;
pub mod jwt;
pub(crate) mod keys;
pub(crate) mod resource;
pub(crate) mod scopes;
pub(crate) mod tokens;

use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use bytes::Bytes;

pub(crate) use resource::{AS_METADATA_PATH, ResourceServer, TokenRefusal};
pub(crate) use scopes::ToolView;
pub use tokens::digest_of;

use crate::config::{Config, OAuthConfig};
use crate::protocol::LazyJson;
use tokens::StaticTokens;

/// Who a request runs as. Cheap to clone; the anonymous one allocates nothing.
/// Equality, hashing and the sealed name are the name alone; an OAuth principal
/// also carries the access token it presented (`Principal::access_token`),
/// kept only to be exchanged for an upstream's (RFC 8693), never sent on.
#[derive(Clone)]
pub struct Principal(Option<Arc<str>>, Option<AccessToken>);

impl PartialEq for Principal {
    fn eq(&self, other: &Principal) -> bool {
        self.0 == other.0
    }
}

impl Eq for Principal {}

impl std::hash::Hash for Principal {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

/// A client's OAuth access token, validated by eragate. Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AccessToken(Arc<str>);

impl AccessToken {
    /// The token itself.
    pub(crate) fn secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(..)")
    }
}

impl Principal {
    /// The principal of every request when authentication is off (and of stdio
    /// clients, whose credentials are their environment).
    pub(crate) const fn anonymous() -> Principal {
        Principal(None, None)
    }

    /// A named principal.
    pub(crate) fn named(name: &str) -> Principal {
        Principal(Some(Arc::from(name)), None)
    }

    /// The principal of an OAuth token: `iss` and `sub` joined by `#` (an issuer
    /// identifier has no fragment, so the first `#` separates them unambiguously).
    pub fn oauth(issuer: &str, subject: &str) -> Principal {
        Principal::named(&format!("{issuer}#{subject}"))
    }

    /// Whether this is the one principal of a gateway without authentication.
    pub(crate) fn is_anonymous(&self) -> bool {
        self.0.is_none()
    }

    /// The name sealed into session ids and `requestState` (empty when anonymous).
    pub(crate) fn as_str(&self) -> &str {
        self.0.as_deref().unwrap_or_default()
    }

    /// The OAuth access token this request presented (none for a static token or an open gateway).
    pub(crate) fn access_token(&self) -> Option<&AccessToken> {
        self.1.as_ref()
    }

    fn presenting(mut self, token: &str) -> Principal {
        self.1 = Some(AccessToken(Arc::from(token)));
        self
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("anonymous"),
            Some(name) => write!(f, "{name:?}"),
        }
    }
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Denied {
    /// No `Authorization: Bearer` credential (401, a challenge without `error`).
    Missing,
    /// A credential that is not an acceptable bearer token (401 `invalid_token`).
    Invalid(&'static str),
    /// A token in the query string (401 `invalid_request`): tokens go only in `Authorization`.
    TokenInQuery,
    /// A valid token without the required scopes (403 `insufficient_scope`).
    InsufficientScope,
    /// The authorization server's keys are not loaded yet (503).
    Unavailable,
}

impl Denied {
    /// What the client is told.
    pub(crate) fn message(self) -> &'static str {
        match self {
            Denied::Missing => "Unauthorized: a bearer token is required",
            Denied::Invalid(_) => "Unauthorized: invalid bearer token",
            Denied::TokenInQuery => "Unauthorized: send the access token in the Authorization header, not the URL",
            Denied::InsufficientScope => "Forbidden: the access token lacks a required scope",
            Denied::Unavailable => "Service Unavailable: the authorization server cannot be reached",
        }
    }

    /// The RFC 6750 error code, when credentials were sent.
    fn error(self) -> Option<(&'static str, &'static str)> {
        match self {
            Denied::Missing | Denied::Unavailable => None,
            Denied::Invalid(why) => Some(("invalid_token", why)),
            Denied::TokenInQuery => Some((
                "invalid_request",
                "access tokens are accepted only in the Authorization header",
            )),
            Denied::InsufficientScope => Some(("insufficient_scope", "the access token lacks a required scope")),
        }
    }
}

/// Who was admitted, and what their token grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Admitted {
    /// Who the request runs as.
    pub(crate) principal: Principal,
    /// The OAuth token's scopes; `None` for a static token or an open gateway, to which
    /// no scope rule applies.
    pub(crate) scopes: Option<Arc<[String]>>,
}

impl Admitted {
    /// The caller of an open gateway, and of stdio (whose credentials are its environment).
    pub(crate) const fn anonymous() -> Admitted {
        Admitted::without_scopes(Principal::anonymous())
    }

    const fn without_scopes(principal: Principal) -> Admitted {
        Admitted {
            principal,
            scopes: None,
        }
    }
}

/// What a request presented.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Presented<'a> {
    /// The MCP path of the backend it is for (the protected resource).
    pub(crate) resource_path: &'a str,
    /// The `Authorization` header's value, if any.
    pub(crate) authorization: Option<&'a [u8]>,
    /// The URL's query, if any.
    pub(crate) query: Option<&'a str>,
}

/// A well-known document eragate serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum WellKnown {
    /// The JSON document.
    Document(Bytes),
    /// One that exists but cannot be served yet (the issuer was not reached): 503.
    NotLoaded,
}

/// Every way in: static tokens and, when configured, OAuth. `[auth.oauth]` is swapped
/// by a reload (`Authenticator::reload_oauth`): a request checks its token against the
/// resource server current when it arrived, which it holds until it is answered.
pub struct Authenticator {
    tokens: StaticTokens,
    oauth: ArcSwapOption<ResourceServer>,
}

impl Authenticator {
    /// Builds the authenticator; `Err` names a token whose environment variable is unset.
    pub fn from_config(config: &Config) -> Result<Authenticator, String> {
        let tokens = StaticTokens::from_config(&config.auth)?;
        let oauth = resource_server(config)?.map(Arc::new);
        Ok(Authenticator {
            tokens,
            oauth: ArcSwapOption::new(oauth),
        })
    }

    /// An authenticator that lets everyone in as the anonymous principal.
    #[cfg(test)]
    pub(crate) fn open() -> Authenticator {
        Authenticator {
            tokens: StaticTokens::none(),
            oauth: ArcSwapOption::empty(),
        }
    }

    /// Whether requests must carry a token.
    pub(crate) fn is_required(&self) -> bool {
        !self.tokens.is_empty() || self.oauth.load().is_some()
    }

    /// The OAuth resource server, when configured (the one current now).
    pub fn oauth(&self) -> Option<Arc<ResourceServer>> {
        self.oauth.load_full()
    }

    /// Starts what runs in the background (loading the issuer's keys).
    pub(crate) fn start(&self) {
        if let Some(oauth) = &*self.oauth.load() {
            oauth.spawn_loader();
        }
    }

    /// Swaps in the resource server of a reloaded `config` (its `[auth.oauth]`, or the
    /// upstream paths it protects, changed) and starts loading its issuer's keys. Requests
    /// already admitted keep what they were granted; the old server's key loader ends when
    /// the last request holding it is answered. Not for `[auth.server]`, whose keys are
    /// eragate's own and read at start.
    pub(crate) fn reload_oauth(&self, config: &Config) -> Result<(), String> {
        let oauth = resource_server(config)?.map(Arc::new);
        if let Some(oauth) = &oauth {
            oauth.spawn_loader();
        }
        self.oauth.store(oauth);
        Ok(())
    }

    /// Who a request that presented `presented` runs as.
    pub(crate) async fn authenticate(&self, presented: Presented<'_>) -> Result<Admitted, Denied> {
        if !self.is_required() {
            return Ok(Admitted::without_scopes(Principal::anonymous()));
        }
        if presented.query.is_some_and(has_access_token) {
            return Err(Denied::TokenInQuery);
        }
        let value = presented.authorization.ok_or(Denied::Missing)?;
        let token = bearer_token(value).ok_or(Denied::Invalid("not a bearer token"))?;
        let digest = tokens::digest_of_bytes(token);
        if let Some(principal) = self.tokens.find(&digest) {
            return Ok(Admitted::without_scopes(principal));
        }
        let Some(oauth) = self.oauth.load_full() else {
            return Err(Denied::Invalid("unknown token"));
        };
        let token = std::str::from_utf8(token).map_err(|_| Denied::Invalid("the token is not a JWT"))?;
        match oauth.check(presented.resource_path, token, digest).await {
            Ok((principal, scopes)) => Ok(Admitted {
                principal: principal.presenting(token),
                scopes: Some(scopes),
            }),
            Err(TokenRefusal::Invalid(why)) => {
                tracing::debug!(reason = %why, "refused an access token");
                Err(Denied::Invalid(jwt_reason(why)))
            }
            Err(TokenRefusal::InsufficientScope) => Err(Denied::InsufficientScope),
            Err(TokenRefusal::KeysUnavailable) => Err(Denied::Unavailable),
        }
    }

    /// The scopes `admitted` lacks for `method` on `params` under `[auth.oauth.scopes_for]`
    /// (empty: allowed).
    pub(crate) fn missing_scopes(&self, admitted: &Admitted, method: &str, params: Option<&LazyJson>) -> Vec<String> {
        match (&*self.oauth.load(), &admitted.scopes) {
            // The params stay text unless a rule needs the name they carry.
            (Some(oauth), Some(granted)) => {
                let name_in = |member| params.and_then(|params| params.get(member)?.as_str());
                oauth.scope_policy().missing(granted, method, name_in)
            }
            _ => Vec::new(),
        }
    }

    /// Which tools `admitted` may see in `tools/list`: `None` when every caller sees the
    /// same list (no OAuth token, or no rule names a single tool).
    pub(crate) fn tool_view(&self, admitted: &Admitted) -> Option<ToolView> {
        let oauth = self.oauth.load_full()?;
        let granted = admitted.scopes.as_ref()?;
        let policy = oauth.scope_policy();
        policy
            .has_tool_rules()
            .then(|| ToolView::new(policy.clone(), granted.clone()))
    }

    /// Whether some caller may see less of `tools/list` than another (a rule
    /// names a tool): then no list is the same for everyone.
    pub(crate) fn filters_lists(&self) -> bool {
        self.oauth
            .load()
            .as_ref()
            .is_some_and(|oauth| oauth.scope_policy().has_tool_rules())
    }

    /// The challenge of a 403 for `missing` scopes (step-up): `scope` names them.
    pub(crate) fn step_up_challenge(&self, resource_path: &str, missing: &[String]) -> String {
        match &*self.oauth.load() {
            Some(oauth) => {
                oauth.challenge_with_scope(resource_path, Denied::InsufficientScope.error(), &missing.join(" "))
            }
            None => self.challenge(Denied::InsufficientScope, resource_path),
        }
    }

    /// The `WWW-Authenticate` challenge of a refusal on the MCP path `resource_path` (RFC 6750 §3).
    pub(crate) fn challenge(&self, denied: Denied, resource_path: &str) -> String {
        match &*self.oauth.load() {
            Some(oauth) => oauth.challenge(resource_path, denied.error()),
            None => match denied.error() {
                None => r#"Bearer realm="eragate""#.to_owned(),
                Some((code, _)) => format!(r#"Bearer realm="eragate", error="{code}""#),
            },
        }
    }

    /// The document served at the well-known `path`, if any.
    pub(crate) fn well_known(&self, path: &str) -> Option<WellKnown> {
        let oauth = self.oauth.load_full()?;
        if path == AS_METADATA_PATH {
            return Some(
                oauth
                    .authorization_server_metadata()
                    .map_or(WellKnown::NotLoaded, WellKnown::Document),
            );
        }
        oauth.metadata_at(path).map(WellKnown::Document)
    }
}

/// The resource server `config` asks for: `[auth.oauth]`'s issuer, or eragate's own
/// (`[auth.server]`: its tokens, its keys, no fetch).
fn resource_server(config: &Config) -> Result<Option<ResourceServer>, String> {
    match (&config.auth.oauth, &config.auth.server) {
        (oauth, Some(server)) => {
            let issuer = server.issuer(&config.listen);
            let mut oauth = oauth.clone().unwrap_or_else(|| OAuthConfig::for_issuer(&issuer));
            oauth.issuer = issuer;
            ResourceServer::local(&oauth, config).map(Some)
        }
        (Some(oauth), None) => ResourceServer::new(oauth, config).map(Some),
        (None, None) => Ok(None),
    }
}

fn jwt_reason(error: jwt::JwtError) -> &'static str {
    use jwt::JwtError::*;
    match error {
        NotAJwt => "the token is not a JWT",
        AlgorithmNotAllowed => "the signature algorithm is not accepted",
        UnknownKey => "the token was signed by an unknown key",
        BadSignature => "the signature is invalid",
        NotAnAccessToken => "the token is not an access token (typ is not at+jwt)",
        WrongIssuer => "the token was issued by another authorization server",
        WrongAudience => "the token is for another resource",
        Expired => "the token has expired",
        NotYetValid => "the token is not valid yet",
        MissingClaim => "the token lacks a required claim",
        Inactive => "the token is not active",
    }
}

/// Whether a query string carries `access_token` (RFC 6750 §2.3, which MCP forbids).
fn has_access_token(query: &str) -> bool {
    query.split('&').any(|pair| {
        pair.split('=')
            .next()
            .is_some_and(|name| name.eq_ignore_ascii_case("access_token"))
    })
}

/// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{AuthConfig, TokenConfig, TokenSource};

    fn with_tokens(tokens: &[(&str, &str)]) -> Authenticator {
        let config = Config {
            auth: AuthConfig {
                tokens: tokens
                    .iter()
                    .map(|(principal, token)| TokenConfig {
                        principal: (*principal).to_owned(),
                        source: TokenSource::Sha256(digest_of(token)),
                    })
                    .collect(),
                oauth: None,
                server: None,
            },
            ..Config::default()
        };
        Authenticator::from_config(&config).expect("no env tokens")
    }

    fn presented(authorization: Option<&[u8]>) -> Presented<'_> {
        Presented {
            resource_path: "/mcp",
            authorization,
            query: None,
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn a_request_s_params_are_read_only_when_a_scope_rule_needs_their_name() {
        // (rules of `[auth.oauth.scopes_for]`, the tool called, scopes missing, whether the
        // params' tree was built); the token is granted `mcp:tools`
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a [&'a str], bool);
        let cases: &[Case] = &[
            (&[], "wipe", &[], false),
            (&[("tools/list", "mcp:admin")], "wipe", &[], false),
            (&[("tools/call", "mcp:admin")], "wipe", &["mcp:admin"], false),
            (&[("prompts/get:x", "mcp:admin")], "wipe", &[], false),
            (&[("tools/call:wipe", "mcp:admin")], "wipe", &["mcp:admin"], true),
            (&[("tools/call:wipe", "mcp:admin")], "echo", &[], true),
            (&[("tools/call:del*", "mcp:admin")], "delete", &["mcp:admin"], true),
        ];
        for (rules, tool, missing, built) in cases {
            let mut oauth = OAuthConfig::for_issuer("https://auth.example.com");
            oauth.scopes_for = rules
                .iter()
                .map(|(k, v)| ((*k).to_owned(), vec![(*v).to_owned()]))
                .collect();
            let mut config = Config::default();
            config.auth.oauth = Some(oauth);
            let auth = Authenticator::from_config(&config).expect("an OAuth gateway");
            let admitted = Admitted {
                principal: Principal::named("alice"),
                scopes: Some(Arc::from(vec!["mcp:tools".to_owned()])),
            };
            let text = format!(r#"{{"name":"{tool}","arguments":{{"all":true}}}}"#);
            let params = LazyJson::from_text(&text, false);
            assert_eq!(
                auth.missing_scopes(&admitted, "tools/call", Some(&params)),
                *missing,
                "{rules:?} {tool}"
            );
            assert_eq!(params.tree_was_built(), *built, "{rules:?} {tool}");
        }
    }

    #[test]
    fn open_gateway_admits_everyone_anonymously() {
        let open = Authenticator::open();
        let anonymous = Ok(Admitted::without_scopes(Principal::anonymous()));
        assert_eq!(block_on(open.authenticate(presented(None))), anonymous);
        assert_eq!(block_on(open.authenticate(presented(Some(b"Bearer x")))), anonymous);
    }

    #[test]
    fn tokens_name_their_principal() {
        let auth = with_tokens(&[("alice", "a-secret"), ("bob", "b-secret"), ("alice", "a-rotated")]);
        type Case<'a> = (Option<&'a [u8]>, Result<&'a str, Denied>);
        let cases: &[Case] = &[
            (Some(b"Bearer a-secret"), Ok("alice")),
            (Some(b"bearer b-secret"), Ok("bob")),
            (Some(b"BEARER  a-rotated "), Ok("alice")),
            (None, Err(Denied::Missing)),
            (Some(b"Bearer "), Err(Denied::Invalid("not a bearer token"))),
            (Some(b"Bearer a-secre"), Err(Denied::Invalid("unknown token"))),
            (Some(b"Basic YWxpY2U6eA=="), Err(Denied::Invalid("not a bearer token"))),
            (Some(b"a-secret"), Err(Denied::Invalid("not a bearer token"))),
        ];
        for (header, expected) in cases {
            let got = block_on(auth.authenticate(presented(*header))).map(|a| a.principal);
            assert_eq!(got, expected.map(Principal::named), "{header:?}");
        }
    }

    #[test]
    fn a_token_in_the_query_string_is_refused() {
        let auth = with_tokens(&[("alice", "a-secret")]);
        for query in ["access_token=a-secret", "x=1&ACCESS_TOKEN=a-secret", "access_token"] {
            let request = Presented {
                query: Some(query),
                ..presented(Some(b"Bearer a-secret"))
            };
            assert_eq!(
                block_on(auth.authenticate(request)),
                Err(Denied::TokenInQuery),
                "{query}"
            );
        }
        let request = Presented {
            query: Some("session_id=abc"),
            ..presented(Some(b"Bearer a-secret"))
        };
        assert_eq!(
            block_on(auth.authenticate(request)).map(|a| a.principal),
            Ok(Principal::named("alice"))
        );
    }

    #[test]
    fn challenges_follow_rfc_6750() {
        let auth = with_tokens(&[("alice", "a-secret")]);
        assert_eq!(auth.challenge(Denied::Missing, "/mcp"), r#"Bearer realm="eragate""#);
        assert!(
            auth.challenge(Denied::Invalid("x"), "/mcp")
                .contains(r#"error="invalid_token""#)
        );
    }

    #[test]
    fn unset_environment_token_is_reported() {
        let mut config = Config::default();
        config.auth.tokens = vec![TokenConfig {
            principal: "ci".into(),
            source: TokenSource::Env("ERAGATE_TEST_SURELY_UNSET_TOKEN".into()),
        }];
        let error = Authenticator::from_config(&config).err().expect("unset");
        assert!(error.contains("ERAGATE_TEST_SURELY_UNSET_TOKEN"), "{error}");
    }
}
