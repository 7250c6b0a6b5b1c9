//! Credentials toward an upstream: the header eragate puts on every HTTP request
//! to it (POSTs, the GET event stream, DELETE, the era probe), built from
//! `[upstreams.credentials]` — nothing, a static header, eragate's own OAuth
//! token (client credentials), or a principal's token exchanged for one whose
//! audience is the upstream (RFC 8693). The client's own token is never among
//! them: the transports build their headers from scratch.
//!
//! | file | what it holds |
//! |---|---|
//! | `token.rs` | pure: freshness of a cached token, token forms, token responses |
//! | `client.rs` | eragate as an OAuth client: metadata, registration, cached tokens |

mod client;
pub(crate) mod token;

use std::sync::{Arc, RwLock};

use http::{HeaderName, HeaderValue};

use client::OAuthClient;
pub(crate) use client::Registrations;

use crate::auth::{AccessToken, Principal};
use crate::config::{CredentialsConfig, UpstreamConfig};

/// Why no credential could be had for an upstream.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CredentialError {
    /// The configuration cannot be used (a secret that cannot be read, no client).
    #[error("credentials are misconfigured: {0}")]
    Setup(String),
    /// The authorization server's metadata could not be had.
    #[error("the authorization server's metadata: {0}")]
    Discovery(String),
    /// Registering eragate as a client failed.
    #[error("registering eragate as an OAuth client: {0}")]
    Registration(String),
    /// The token endpoint refused or could not be reached.
    #[error("the token request failed: {0}")]
    TokenRequest(String),
    /// Token exchange needs the client's OAuth access token, and this request has none.
    #[error("this upstream is reached by token exchange, which needs an OAuth access token from the client")]
    NoSubject,
}

/// The principal a session's credential is exchanged for (token exchange): its
/// name, which keys the cache of exchanged tokens, and its newest validated access
/// token, which every request of the principal refreshes (a client rotates its
/// token; the session outlives each one). Shared by the sessions of one partition.
pub(crate) struct Subject {
    principal: String,
    token: RwLock<AccessToken>,
}

impl Subject {
    /// The subject of `principal`, when it presented an OAuth access token.
    pub(crate) fn of(principal: &Principal) -> Option<Arc<Subject>> {
        let token = principal.access_token()?.clone();
        Some(Arc::new(Subject {
            principal: principal.as_str().to_owned(),
            token: RwLock::new(token),
        }))
    }

    /// Records the token `principal` presented now.
    pub(crate) fn update(&self, principal: &Principal) {
        if let Some(token) = principal.access_token() {
            let mut current = self.token.write().unwrap_or_else(|e| e.into_inner());
            if *current != *token {
                *current = token.clone();
            }
        }
    }

    fn token(&self) -> String {
        self.token.read().unwrap_or_else(|e| e.into_inner()).secret().to_owned()
    }
}

impl std::fmt::Debug for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Subject({:?})", self.principal)
    }
}

/// What eragate presents to one upstream.
pub(crate) enum UpstreamCredentials {
    /// Nothing.
    None,
    /// A static header.
    Header(HeaderName, HeaderValue),
    /// A bearer token from the upstream's authorization server.
    OAuth(Arc<OAuthClient>),
    /// Configured but unusable (`check-config` says why): every request fails with it.
    Broken(CredentialError),
}

impl UpstreamCredentials {
    /// The credentials `config` names; OAuth clients registered through `registrations`.
    pub(crate) fn from_config(config: &UpstreamConfig, registrations: &Arc<Registrations>) -> UpstreamCredentials {
        let built = match &config.credentials {
            CredentialsConfig::None {} => Ok(UpstreamCredentials::None),
            CredentialsConfig::Header(header) => header_credentials(header),
            CredentialsConfig::ClientCredentials(client) | CredentialsConfig::TokenExchange(client) => {
                let exchange = matches!(config.credentials, CredentialsConfig::TokenExchange(_));
                OAuthClient::new(client, exchange, default_resource(config), registrations.clone())
                    .map(|client| UpstreamCredentials::OAuth(Arc::new(client)))
            }
        };
        built.unwrap_or_else(|error| {
            tracing::error!(upstream = %config.name, error = %error, "upstream credentials unusable");
            UpstreamCredentials::Broken(error)
        })
    }

    /// Whether the credential is a principal's (token exchange): sessions then
    /// belong to one principal each.
    pub(crate) fn per_principal(&self) -> bool {
        matches!(self, UpstreamCredentials::OAuth(client) if client.exchanges())
    }

    /// The header to send, for a request on behalf of `subject` (token exchange only).
    pub(crate) async fn header(
        &self,
        subject: Option<&Subject>,
    ) -> Result<Option<(HeaderName, HeaderValue)>, CredentialError> {
        match self {
            UpstreamCredentials::None => Ok(None),
            UpstreamCredentials::Header(name, value) => Ok(Some((name.clone(), value.clone()))),
            UpstreamCredentials::Broken(error) => Err(error.clone()),
            // Boxed: the token request's future would otherwise size the state of
            // every request toward every upstream, and be moved with it.
            UpstreamCredentials::OAuth(client) => Box::pin(bearer_header(client, subject)).await,
        }
    }

    /// Whether a 401 is worth a second try with a fresh token.
    pub(crate) fn can_renew(&self) -> bool {
        matches!(self, UpstreamCredentials::OAuth(_))
    }

    /// The upstream answered 401 to `sent`: the cached token goes.
    pub(crate) fn refused(&self, sent: &HeaderValue, subject: Option<&Subject>) {
        if let UpstreamCredentials::OAuth(client) = self
            && let Some(token) = sent.to_str().ok().and_then(|v| v.strip_prefix("Bearer "))
        {
            client.refused(token, subject.map(|s| s.principal.as_str()));
        }
    }
}

/// `Authorization: Bearer` with a token from `client`, for `subject` when it exchanges.
async fn bearer_header(
    client: &Arc<OAuthClient>,
    subject: Option<&Subject>,
) -> Result<Option<(HeaderName, HeaderValue)>, CredentialError> {
    let subject = subject.map(|s| (s.token(), s.principal.as_str()));
    let token = client.token(subject.as_ref().map(|(t, p)| (t.as_str(), *p))).await?;
    let value = HeaderValue::try_from(format!("Bearer {token}"))
        .map_err(|_| CredentialError::TokenRequest("the access token is not a header value".into()))?;
    Ok(Some((http::header::AUTHORIZATION, value)))
}

fn header_credentials(header: &crate::config::HeaderCredential) -> Result<UpstreamCredentials, CredentialError> {
    let name = HeaderName::from_bytes(header.header.as_bytes())
        .map_err(|_| CredentialError::Setup(format!("{:?} is not a header name", header.header)))?;
    let mut value = header
        .value()
        .map_err(CredentialError::Setup)
        .and_then(|v| HeaderValue::try_from(v).map_err(|_| CredentialError::Setup("not a header value".into())))?;
    value.set_sensitive(true);
    Ok(UpstreamCredentials::Header(name, value))
}

/// The RFC 8707 resource of an upstream: its (first) URL.
fn default_resource(config: &UpstreamConfig) -> String {
    let url = match (&config.http, &config.sse) {
        (Some(http), _) => http.members().first().cloned(),
        (None, Some(sse)) => Some(sse.url.clone()),
        (None, None) => None,
    };
    url.map(|u| u.to_string()).unwrap_or_default()
}
