//! eragate as an OAuth protected resource: the canonical URI of each MCP path,
//! its Protected Resource Metadata (RFC 9728), the challenges of its refusals
//! (RFC 6750 §3 with `resource_metadata` and `scope`), and the JWT checks of its
//! tokens against the issuer's keys.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use jsonwebtoken::Algorithm;
use serde_json::json;

use super::Principal;
use super::fetch::Fetcher;
use super::grants::{DEFAULT_CAPACITY, Grant, Grants};
use super::introspect::{Introspected, Introspector};
use super::jwt::{self, Audience, JwtError};
use super::keys::{KeyStore, LoadError};
use super::scopes::ScopePolicy;
use crate::config::{Config, OAuthConfig};

/// The well-known prefix of protected resource metadata (RFC 9728 §3).
pub(crate) const PRM_PREFIX: &str = "/.well-known/oauth-protected-resource";
/// Where a 2025-03-26 client looks for authorization server metadata (RFC 8414), at the MCP origin.
pub(crate) const AS_METADATA_PATH: &str = "/.well-known/oauth-authorization-server";

/// The protected resource in front of every MCP path.
pub struct ResourceServer {
    issuer: String,
    algorithms: Vec<Algorithm>,
    required_scopes: Vec<String>,
    /// `scope` of every challenge: the required scopes, else the advertised ones.
    challenge_scope: String,
    /// One per MCP path, in configuration order (the first also owns the root metadata URL).
    resources: Vec<Protected>,
    keys: Arc<KeyStore>,
    /// Tokens already verified (bounded).
    grants: Grants,
    leeway: u64,
    /// Opaque tokens, when configured.
    introspector: Option<Introspector>,
    /// Scopes per method and tool.
    policy: Arc<ScopePolicy>,
}

/// One MCP path as a protected resource.
struct Protected {
    path: String,
    resource: String,
    metadata_url: String,
    document: Bytes,
    audience: Audience,
}

/// Why an OAuth token was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenRefusal {
    /// Not acceptable: 401 `invalid_token`.
    Invalid(JwtError),
    /// Acceptable, but without every required scope: 403 `insufficient_scope`.
    InsufficientScope,
    /// The issuer's keys are not loaded yet (it was unreachable): 503.
    KeysUnavailable,
}

impl ResourceServer {
    /// The resource server of `config`, whose `listen.public_url` (or listener address)
    /// names the resources. Nothing is fetched yet.
    pub(crate) fn new(oauth: &OAuthConfig, config: &Config) -> Result<ResourceServer, String> {
        ResourceServer::build(oauth, config, false)
    }

    /// The resource server of tokens minted by eragate's own authorization server
    /// (`[auth.server]`), which publishes its keys into [`ResourceServer::keys`].
    pub(crate) fn local(oauth: &OAuthConfig, config: &Config) -> Result<ResourceServer, String> {
        ResourceServer::build(oauth, config, true)
    }

    // Builds each path's metadata and challenges in one pass (86 lines), in the order a reader checks them.
    fn build(oauth: &OAuthConfig, config: &Config, local: bool) -> Result<ResourceServer, String> {
        let base = config
            .listen
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", config.listen.address));
        let base = base.trim_end_matches('/');
        let issuer = oauth.issuer.clone();
        let algorithms = jwt::algorithms(&oauth.algorithms);
        let scopes = oauth.advertised_scopes();
        let leeway = oauth.leeway.0.as_secs();
        let resources = config
            .upstreams
            .iter()
            .enumerate()
            .map(|(i, upstream)| {
                let resource = match (&oauth.resource, i) {
                    (Some(resource), 0) => resource.clone(),
                    _ => format!("{base}{}", upstream.path),
                };
                let metadata_url = format!("{base}{PRM_PREFIX}{}", upstream.path);
                let mut document = json!({
                    "resource": resource,
                    "authorization_servers": [issuer],
                    "bearer_methods_supported": ["header"],
                });
                if !scopes.is_empty() {
                    document["scopes_supported"] = json!(scopes);
                }
                if let Some(name) = &oauth.resource_name {
                    document["resource_name"] = json!(name);
                }
                if let Some(doc) = &oauth.resource_documentation {
                    document["resource_documentation"] = json!(doc);
                }
                Protected {
                    path: upstream.path.clone(),
                    resource: resource.clone(),
                    metadata_url,
                    document: Bytes::from(document.to_string()),
                    audience: match oauth.require_at_jwt {
                        true => Audience::new(&issuer, &resource, leeway),
                        false => Audience::new(&issuer, &resource, leeway).accepting_any_typ(),
                    },
                }
            })
            .collect();
        let fetcher = Fetcher::new(oauth.timeout.0, oauth.ca.as_deref()).map_err(|e| e.to_string())?;
        let introspector = match &oauth.introspection {
            Some(config) => {
                let secret = config.secret().ok_or_else(|| {
                    "auth.oauth.introspection: the client secret is not set (client_secret or client_secret_env)"
                        .to_owned()
                })?;
                Some(Introspector::new(
                    fetcher.clone(),
                    &config.client_id,
                    &secret,
                    config.endpoint.clone(),
                    config.max_entries,
                    config.cache_max.0,
                ))
            }
            None => None,
        };
        let keys = Arc::new(match local {
            true => KeyStore::local(fetcher, &issuer, algorithms.clone()),
            false => KeyStore::new(fetcher, &issuer, algorithms.clone(), oauth.jwks_min_refetch.0),
        });
        let challenge_scope = if oauth.required_scopes.is_empty() {
            scopes.join(" ")
        } else {
            oauth.required_scopes.join(" ")
        };
        Ok(ResourceServer {
            issuer,
            algorithms,
            required_scopes: oauth.required_scopes.clone(),
            challenge_scope,
            resources,
            keys,
            grants: Grants::new(DEFAULT_CAPACITY),
            leeway,
            introspector,
            policy: Arc::new(ScopePolicy::new(&oauth.scopes_for)),
        })
    }

    /// Starts loading the issuer's metadata and keys in the background.
    pub(crate) fn spawn_loader(&self) {
        self.keys.spawn_loader();
    }

    /// Loads them now (for `check-config`).
    pub async fn load_now(&self) -> Result<(), LoadError> {
        self.keys.load_now().await.map(|_| ())
    }

    /// The issuer.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The issuer's keys (published there by eragate's own authorization server).
    pub(crate) fn keys(&self) -> &Arc<KeyStore> {
        &self.keys
    }

    /// The canonical URI of each protected MCP path, in configuration order.
    pub(crate) fn resources(&self) -> Vec<String> {
        self.resources.iter().map(|p| p.resource.clone()).collect()
    }

    /// The scope rules per method and tool.
    pub(crate) fn scope_policy(&self) -> &Arc<ScopePolicy> {
        &self.policy
    }

    /// Checks a bearer `token` for the MCP path `path`: its principal and scopes.
    /// `digest` is the token's SHA-256 ([`super::tokens::digest_of_bytes`]), computed once per request.
    pub(crate) async fn check(
        &self,
        path: &str,
        token: &str,
        digest: [u8; 32],
    ) -> Result<(Principal, Arc<[String]>), TokenRefusal> {
        let (index, protected) = self
            .resources
            .iter()
            .enumerate()
            .find(|(_, p)| p.path == path)
            .ok_or(TokenRefusal::Invalid(JwtError::WrongAudience))?;
        let loaded = self.keys.current().await;
        let now = unix_now();
        // A token seen before passed every check below, so its digest is enough.
        let cached = loaded
            .as_ref()
            .and_then(|l| self.grants.find(&digest, index, &l.keys, now));
        let grant = match cached {
            Some(grant) => grant,
            None => {
                let header = match jwt::header(token, &self.algorithms) {
                    Ok(header) => header,
                    Err(JwtError::NotAJwt) if self.introspector.is_some() => {
                        let loaded = loaded.ok_or(TokenRefusal::KeysUnavailable)?;
                        return self.introspect(token, digest, index, protected, &loaded, now).await;
                    }
                    Err(why) => return Err(TokenRefusal::Invalid(why)),
                };
                let keys = loaded.ok_or(TokenRefusal::KeysUnavailable)?.keys.clone();
                let grant = self.verify(token, &header, index, protected, keys, now).await?;
                self.grants.insert(digest, grant.clone(), now);
                grant
            }
        };
        if !grant.scoped {
            return Err(TokenRefusal::InsufficientScope);
        }
        Ok((grant.principal, grant.scopes))
    }

    /// An opaque token, by introspection (its own cache).
    async fn introspect(
        &self,
        token: &str,
        digest: [u8; 32],
        index: usize,
        protected: &Protected,
        loaded: &super::keys::Loaded,
        now: u64,
    ) -> Result<(Principal, Arc<[String]>), TokenRefusal> {
        let Some(introspector) = &self.introspector else {
            return Err(TokenRefusal::Invalid(JwtError::NotAJwt));
        };
        let discovered = loaded.metadata.introspection_endpoint.as_deref();
        let Some(endpoint) = introspector.endpoint(discovered) else {
            tracing::warn!(issuer = %self.issuer, "opaque token, but no introspection endpoint is known");
            return Err(TokenRefusal::Invalid(JwtError::NotAJwt));
        };
        let answer = introspector
            .introspect(endpoint, token, digest, (index, &protected.resource), &self.issuer, now)
            .await
            .map_err(|error| {
                tracing::warn!(error = %error, "introspection failed");
                TokenRefusal::KeysUnavailable
            })?;
        match answer {
            Introspected::Active { subject, scopes } if self.required_scopes.iter().all(|s| scopes.contains(s)) => {
                Ok((Principal::oauth(&self.issuer, &subject), Arc::from(scopes)))
            }
            Introspected::Active { .. } => Err(TokenRefusal::InsufficientScope),
            Introspected::Refused(why) => Err(TokenRefusal::Invalid(why)),
        }
    }

    async fn verify(
        &self,
        token: &str,
        header: &jwt::TokenHeader,
        index: usize,
        protected: &Protected,
        mut keys: Arc<jwt::KeySet>,
        now: u64,
    ) -> Result<Grant, TokenRefusal> {
        if !keys.knows(header) {
            keys = self
                .keys
                .refetch(&keys)
                .await
                .ok_or(TokenRefusal::Invalid(JwtError::UnknownKey))?;
        }
        let verified = jwt::verify(token, header, &keys, &protected.audience, now).map_err(TokenRefusal::Invalid)?;
        Ok(Grant {
            principal: Principal::oauth(&verified.issuer, &verified.subject),
            scoped: self.required_scopes.iter().all(|s| verified.scopes.contains(s)),
            scopes: Arc::from(verified.scopes),
            until: verified.expires.saturating_add(self.leeway),
            resource: index,
            keys,
        })
    }

    /// The protected resource metadata served at `path`, if it is one of its URLs.
    pub(crate) fn metadata_at(&self, path: &str) -> Option<Bytes> {
        let rest = path.strip_prefix(PRM_PREFIX)?;
        let protected = if rest.is_empty() || rest == "/" {
            self.resources.first()
        } else {
            self.resources.iter().find(|p| p.path == rest)
        };
        protected.map(|p| p.document.clone())
    }

    /// The authorization server's own metadata, for 2025-03-26 clients (once loaded).
    pub(crate) fn authorization_server_metadata(&self) -> Option<Bytes> {
        self.keys.metadata_document()
    }

    /// The `WWW-Authenticate` value of a refusal on the MCP path `path`: `error` is
    /// `None` when no credentials were sent (RFC 6750 §3.1).
    pub(crate) fn challenge(&self, path: &str, error: Option<(&str, &str)>) -> String {
        self.challenge_with_scope(path, error, &self.challenge_scope)
    }

    /// [`ResourceServer::challenge`] naming `scope` instead of the required scopes.
    pub(crate) fn challenge_with_scope(&self, path: &str, error: Option<(&str, &str)>, scope: &str) -> String {
        let metadata_url = self
            .protected(path)
            .or(self.resources.first())
            .map_or("", |p| p.metadata_url.as_str());
        let mut value = String::from("Bearer ");
        if let Some((code, description)) = error {
            value.push_str(&format!("error=\"{code}\", error_description=\"{description}\", "));
        }
        value.push_str(&format!("resource_metadata=\"{metadata_url}\""));
        if !scope.is_empty() {
            value.push_str(&format!(", scope=\"{scope}\""));
        }
        value
    }

    fn protected(&self, path: &str) -> Option<&Protected> {
        self.resources.iter().find(|p| p.path == path)
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}
