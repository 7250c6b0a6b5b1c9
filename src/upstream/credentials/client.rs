//! eragate as an OAuth client of an upstream's authorization server: its metadata
//! (RFC 8414, then OpenID discovery, `issuer` compared exactly), eragate's client
//! there (configured, or registered once per issuer by RFC 7591), and tokens for
//! the upstream — its own by client credentials, or a principal's by RFC 8693
//! exchange — cached until expiry, refreshed ahead of it, one request at a time.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use dashmap::DashMap;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::OnceCell;

use super::CredentialError;
use super::token::{self, AuthMethod, ClientAuth, Freshness, Grant, HeldToken, TOKEN_EXCHANGE_GRANT};
use crate::auth::discovery;
use crate::auth::fetch::Fetcher;
use crate::config::OAuthClientCredential;

/// A failed token request is not retried for this long (every request would wait on it).
const FAILURE_BACKOFF: Duration = Duration::from_secs(1);
/// Most principals whose exchanged tokens one upstream keeps.
const MAX_EXCHANGED: usize = 1024;

/// Clients eragate registered, by issuer and grant: one registration each per
/// process, renewed when its secret is about to expire.
#[derive(Default)]
pub(crate) struct Registrations {
    clients: DashMap<(String, &'static str), Arc<OnceCell<Arc<ClientAuth>>>>,
}

impl Registrations {
    /// The registration cell of `key`: a fresh one when the registered client's
    /// secret expires soon, so that the next caller registers again.
    fn cell(&self, key: (String, &'static str)) -> Arc<OnceCell<Arc<ClientAuth>>> {
        let mut cell = self.clients.entry(key).or_default();
        if cell.get().is_some_and(|client| client.expired(SystemTime::now())) {
            *cell = Arc::default();
        }
        cell.clone()
    }
}

/// What eragate needs from the authorization server's metadata.
#[derive(Deserialize)]
struct AsMetadata {
    token_endpoint: String,
    #[serde(default)]
    registration_endpoint: Option<String>,
    #[serde(default)]
    token_endpoint_auth_methods_supported: Option<Vec<String>>,
}

/// One upstream's OAuth client.
pub(crate) struct OAuthClient {
    config: OAuthClientCredential,
    /// The RFC 8707 resource asked for.
    resource: String,
    grant_type: &'static str,
    fetcher: Fetcher,
    registrations: Arc<Registrations>,
    metadata: OnceCell<Arc<AsMetadata>>,
    /// eragate's own token (client credentials).
    own: TokenSlot,
    /// Exchanged tokens by principal (bounded: [`MAX_EXCHANGED`]).
    exchanged: DashMap<String, Arc<TokenSlot>>,
}

/// One cached token and the single flight that replaces it.
#[derive(Default)]
pub(super) struct TokenSlot {
    /// A std lock, never held across `.await`.
    current: RwLock<Option<HeldToken>>,
    /// Held while a token request is out; remembers the last failure for a moment.
    refreshing: tokio::sync::Mutex<Option<(Instant, CredentialError)>>,
    /// Set while a refresh ahead of expiry runs in the background.
    ahead: Mutex<bool>,
}

impl OAuthClient {
    /// A client for `config`, asking for `resource` (the upstream's URL by default).
    pub(crate) fn new(
        config: &OAuthClientCredential,
        exchange: bool,
        default_resource: String,
        registrations: Arc<Registrations>,
    ) -> Result<OAuthClient, CredentialError> {
        let fetcher =
            Fetcher::new(config.timeout.0, config.ca.as_deref()).map_err(|e| CredentialError::Setup(e.to_string()))?;
        Ok(OAuthClient {
            resource: config.resource.clone().unwrap_or(default_resource),
            grant_type: if exchange {
                TOKEN_EXCHANGE_GRANT
            } else {
                "client_credentials"
            },
            config: config.clone(),
            fetcher,
            registrations,
            metadata: OnceCell::new(),
            own: TokenSlot::default(),
            exchanged: DashMap::new(),
        })
    }

    /// Whether tokens are a principal's (token exchange) rather than eragate's own.
    pub(crate) fn exchanges(&self) -> bool {
        self.grant_type == TOKEN_EXCHANGE_GRANT
    }

    /// A token for the upstream: eragate's own, or (token exchange; `subject`: the
    /// client's token and its principal) one exchanged for the principal's.
    pub(crate) async fn token(self: &Arc<Self>, subject: Option<(&str, &str)>) -> Result<String, CredentialError> {
        let slot = match subject {
            Some((_, principal)) if self.exchanges() => Some(self.exchanged_slot(principal)),
            _ if self.exchanges() => return Err(CredentialError::NoSubject),
            _ => None,
        };
        let subject = subject.filter(|_| self.exchanges());
        let slot_ref = slot.as_deref().unwrap_or(&self.own);
        let now = Instant::now();
        let held = slot_ref.current.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(held) = held {
            match held.freshness(now) {
                Freshness::Fresh => return Ok(held.value),
                Freshness::RefreshAhead => {
                    self.refresh_ahead(slot.clone(), subject.map(|(t, _)| t.to_owned()));
                    return Ok(held.value);
                }
                Freshness::Expired => {}
            }
        }
        self.refresh(slot_ref, subject.map(|(t, _)| t), None).await
    }

    /// The upstream refused `sent`: it is dropped (unless already replaced), so the
    /// next [`OAuthClient::token`] asks for another.
    pub(crate) fn refused(&self, sent: &str, principal: Option<&str>) {
        let slot = match principal {
            Some(principal) => self.exchanged.get(principal).map(|s| s.clone()),
            None => None,
        };
        let slot = slot.as_deref().unwrap_or(&self.own);
        let mut current = slot.current.write().unwrap_or_else(|e| e.into_inner());
        if current.as_ref().is_some_and(|held| held.value == sent) {
            *current = None;
        }
    }

    fn exchanged_slot(&self, principal: &str) -> Arc<TokenSlot> {
        if let Some(slot) = self.exchanged.get(principal) {
            return slot.clone();
        }
        if self.exchanged.len() >= MAX_EXCHANGED {
            // Expired entries go first; if none has, any one (its owner asks again).
            let now = Instant::now();
            self.exchanged.retain(|_, slot| {
                let held = slot.current.read().unwrap_or_else(|e| e.into_inner());
                held.as_ref().is_some_and(|h| h.freshness(now) != Freshness::Expired)
            });
            if self.exchanged.len() >= MAX_EXCHANGED
                && let Some(victim) = self.exchanged.iter().next().map(|e| e.key().clone())
            {
                self.exchanged.remove(&victim);
            }
        }
        self.exchanged.entry(principal.to_owned()).or_default().clone()
    }

    fn refresh_ahead(self: &Arc<Self>, slot: Option<Arc<TokenSlot>>, subject: Option<String>) {
        {
            let own = slot.as_deref().unwrap_or(&self.own);
            let mut ahead = own.ahead.lock().unwrap_or_else(|e| e.into_inner());
            if *ahead {
                return;
            }
            *ahead = true;
        }
        let client = self.clone();
        tokio::spawn(async move {
            let own = slot.as_deref().unwrap_or(&client.own);
            let before = own
                .current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(|h| h.obtained);
            if let Err(error) = client.refresh(own, subject.as_deref(), before).await {
                tracing::warn!(issuer = %client.config.issuer, error = %error, "refreshing an upstream token ahead of expiry failed");
            }
            *own.ahead.lock().unwrap_or_else(|e| e.into_inner()) = false;
        });
    }

    /// Gets a new token into `slot`, one request at a time: whoever waited for the
    /// lock uses the token the request before it got (unless it is the one
    /// obtained at `replacing`, which a refresh ahead means to replace).
    async fn refresh(
        &self,
        slot: &TokenSlot,
        subject: Option<&str>,
        replacing: Option<Instant>,
    ) -> Result<String, CredentialError> {
        let mut last_failure = slot.refreshing.lock().await;
        let now = Instant::now();
        if let Some(held) = slot.current.read().unwrap_or_else(|e| e.into_inner()).as_ref()
            && held.freshness(now) != Freshness::Expired
            && Some(held.obtained) != replacing
        {
            return Ok(held.value.clone());
        }
        if let Some((at, error)) = last_failure.as_ref()
            && now.duration_since(*at) < FAILURE_BACKOFF
        {
            return Err(error.clone());
        }
        match self.request_token(subject).await {
            Ok(held) => {
                let value = held.value.clone();
                *slot.current.write().unwrap_or_else(|e| e.into_inner()) = Some(held);
                *last_failure = None;
                Ok(value)
            }
            Err(error) => {
                *last_failure = Some((Instant::now(), error.clone()));
                Err(error)
            }
        }
    }

    async fn request_token(&self, subject: Option<&str>) -> Result<HeldToken, CredentialError> {
        let metadata = self.metadata().await?;
        let client = self.client(&metadata).await?;
        let grant = match subject {
            Some(subject_token) => Grant::Exchange {
                subject_token,
                audience: self.config.audience.as_deref(),
            },
            None => Grant::ClientCredentials,
        };
        let (form, basic) = token::token_form(grant, self.config.scope.as_deref(), &self.resource, &client);
        let fetched = self
            .fetcher
            .post_form(&metadata.token_endpoint, &form, basic.as_deref())
            .await
            .map_err(|e| CredentialError::TokenRequest(e.to_string()))?;
        token::read_token_response(&fetched.body, Instant::now()).map_err(CredentialError::TokenRequest)
    }

    async fn metadata(&self) -> Result<Arc<AsMetadata>, CredentialError> {
        let metadata = self
            .metadata
            .get_or_try_init(|| async {
                let (url, body) = discovery::fetch_document(&self.fetcher, &self.config.issuer)
                    .await
                    .map_err(|e| CredentialError::Discovery(e.to_string()))?;
                serde_json::from_slice::<AsMetadata>(&body)
                    .map(Arc::new)
                    .map_err(|e| CredentialError::Discovery(format!("{url}: {e}")))
            })
            .await?;
        Ok(metadata.clone())
    }

    /// eragate's client: configured, or registered once per issuer and grant.
    async fn client(&self, metadata: &AsMetadata) -> Result<Arc<ClientAuth>, CredentialError> {
        let supported = metadata.token_endpoint_auth_methods_supported.as_deref();
        if let Some(id) = &self.config.client_id {
            let secret = self.config.secret().map_err(CredentialError::Setup)?;
            let method = AuthMethod::choose(secret.is_some(), supported);
            return Ok(Arc::new(ClientAuth {
                id: id.clone(),
                secret,
                method,
                secret_expires: None,
            }));
        }
        let Some(endpoint) = metadata.registration_endpoint.as_deref() else {
            return Err(CredentialError::Setup(format!(
                "no client_id is configured and {} offers no registration_endpoint",
                self.config.issuer
            )));
        };
        let key = (self.config.issuer.clone(), self.grant_type);
        let cell = self.registrations.cell(key);
        let client = cell
            .get_or_try_init(|| self.register(endpoint, AuthMethod::choose(true, supported)))
            .await?;
        Ok(client.clone())
    }

    /// RFC 7591 registration of a confidential client for this grant.
    async fn register(&self, endpoint: &str, method: AuthMethod) -> Result<Arc<ClientAuth>, CredentialError> {
        #[derive(Deserialize)]
        struct Registered {
            client_id: String,
            #[serde(default)]
            client_secret: Option<String>,
            #[serde(default)]
            token_endpoint_auth_method: Option<String>,
            #[serde(default)]
            client_secret_expires_at: Option<u64>,
        }
        let request = json!({
            "client_name": "eragate",
            "application_type": "web",
            "grant_types": [self.grant_type],
            "response_types": [],
            "redirect_uris": [],
            "token_endpoint_auth_method": method.as_str(),
        });
        let fetched = self
            .fetcher
            .post_json(endpoint, request.to_string().into_bytes(), None)
            .await
            .map_err(|e| CredentialError::Registration(e.to_string()))?;
        let registered: Registered = serde_json::from_slice(&fetched.body)
            .map_err(|e| CredentialError::Registration(format!("not a registration response ({e})")))?;
        let method = match registered.token_endpoint_auth_method.as_deref() {
            Some("client_secret_post") => AuthMethod::Post,
            Some("none") => AuthMethod::None,
            _ => method,
        };
        tracing::info!(issuer = %self.config.issuer, client_id = %registered.client_id, "registered eragate as an OAuth client");
        Ok(Arc::new(ClientAuth {
            id: registered.client_id,
            secret: registered.client_secret,
            method,
            secret_expires: token::secret_expiry(registered.client_secret_expires_at),
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::config::Humantime;

    /// An authorization server on 127.0.0.1 that counts its token requests.
    async fn authorization_server(tokens: Arc<AtomicUsize>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let issuer = format!("http://{}", listener.local_addr().expect("addr"));
        let metadata = json!({"issuer": issuer, "token_endpoint": format!("{issuer}/token")}).to_string();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (tokens, metadata) = (tokens.clone(), metadata.clone());
                tokio::spawn(async move {
                    let mut request = vec![0; 8192];
                    let read = stream.read(&mut request).await.unwrap_or(0);
                    let body = if request[..read].starts_with(b"POST /token") {
                        let n = tokens.fetch_add(1, Ordering::SeqCst) + 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        json!({"access_token": format!("t{n}"), "token_type": "Bearer", "expires_in": 600}).to_string()
                    } else {
                        metadata
                    };
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(format!("{head}{body}").as_bytes()).await;
                });
            }
        });
        issuer
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_share_one_token_request() {
        let tokens = Arc::new(AtomicUsize::new(0));
        let issuer = authorization_server(tokens.clone()).await;
        let config = OAuthClientCredential {
            issuer,
            client_id: Some("eragate".into()),
            client_secret_env: None,
            client_secret_file: None,
            scope: None,
            resource: None,
            audience: None,
            timeout: Humantime(Duration::from_secs(5)),
            ca: None,
        };
        let registrations = Arc::new(Registrations::default());
        let client =
            Arc::new(OAuthClient::new(&config, false, "http://127.0.0.1:1/mcp".into(), registrations).expect("client"));
        let waiting: Vec<_> = (0..16)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move { client.token(None).await })
            })
            .collect();
        for handle in waiting {
            assert_eq!(handle.await.expect("task"), Ok("t1".to_owned()));
        }
        assert_eq!(tokens.load(Ordering::SeqCst), 1);
        // Refused by the upstream: the next caller gets a fresh one.
        client.refused("t1", None);
        assert_eq!(client.token(None).await, Ok("t2".to_owned()));
    }
}
