//! eragate's own OAuth 2.1 authorization server (`[auth.server]`, off by default),
//! mounted on the client listener by the edge: RFC 8414 metadata (and OpenID
//! discovery), its JWKS, `/oauth/authorize` with the login and consent pages,
//! `/oauth/token`, `/oauth/revoke` and `/oauth/register` (RFC 7591), and
//! `/oauth/callback` when sign-in is brokered to an OpenID provider. It mints
//! RFC 9068 access tokens for eragate's own protected resources and publishes its
//! keys straight into their `crate::auth::ResourceServer`, so nothing is fetched.
//!
//! It depends on `auth` (JWT checks, the key store it publishes into) and the
//! configuration; nothing in `auth` depends on it. Its state is behind `store::Store`.

mod attempts;
mod authorize;
mod broker;
pub(crate) mod cimd;
mod pages;
mod passwords;
mod register;
pub(crate) mod rules;
pub(crate) mod signing;
pub(crate) mod store;
mod token;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, Method, StatusCode};
use serde_json::{Value, json};

use crate::auth::ResourceServer;
use crate::auth::keys::KeyStore;
use crate::config::{AUTH_SERVER_PREFIX, AuthServerConfig, Config, LoginSource};
use store::{Client, ClientOrigin, Store, StoredKey};

/// The connection's peer address, put in a request's extensions by the edge; the
/// client's own address is read from it and, when the peer is one of
/// `listen.trusted_proxies`, its forwarding header (`AuthServer::client_address`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClientIp(pub(crate) std::net::IpAddr);

/// The listener's browser checks of a request, put in its extensions by the edge:
/// whether its `Origin` is absent or one the listener allows, and whether its
/// `Host` names the listener (always true when an `Origin` is present: that is
/// judged instead). Which endpoints ask which is [`AuthServer::handle`]'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BrowserChecks {
    /// `Origin` absent, the listener's own or in `listen.allowed_origins`.
    pub(crate) origin_allowed: bool,
    /// `Host` names this listener (see `src/edge/http/hosts.rs`).
    pub(crate) host_allowed: bool,
}

/// A response of the authorization server.
pub(crate) type Response = http::Response<Bytes>;

/// How often the keys are checked for rotation and unused registrations expired.
const HOUSEKEEPING: Duration = Duration::from_secs(60);

/// The built-in authorization server.
pub(crate) struct AuthServer {
    issuer: String,
    /// Scheme, host and port: where the endpoints are.
    origin: String,
    config: AuthServerConfig,
    store: Arc<dyn Store>,
    /// The canonical URIs of the protected MCP paths: the only acceptable `resource`s.
    resources: Vec<String>,
    /// Scopes the resource advertises (accepted when `scopes_supported` is empty).
    resource_scopes: Vec<String>,
    /// Local users and their password checks.
    passwords: passwords::Passwords,
    /// Whose forwarding header names the client (`[listen] trusted_proxies`).
    proxies: crate::config::TrustedProxies,
    /// Which header that is.
    client_ip_header: crate::config::ClientIpHeader,
    keys: RwLock<Arc<Vec<StoredKey>>>,
    published: Arc<KeyStore>,
    metadata: Bytes,
    pending: authorize::Pending,
    /// Registrations this minute: the minute, in all, and per client network.
    registrations: Mutex<register::Registrations>,
    /// Client ID Metadata Documents, when on.
    documents: Option<cimd::Documents>,
    /// Failed sign-ins per user name and client address.
    attempts: attempts::LoginAttempts,
    /// The upstream OpenID provider of `login = "oidc"`.
    broker: Option<broker::Broker>,
}

impl AuthServer {
    /// The authorization server of `config`, publishing into `resource`'s key store;
    /// `None` when `[auth.server]` is off; `Err` when the CA of metadata documents is unusable.
    pub(crate) fn from_config(
        config: &Config,
        resource: Option<&ResourceServer>,
    ) -> Result<Option<Arc<AuthServer>>, String> {
        let (Some(server), Some(resource)) = (config.auth.server.as_ref(), resource) else {
            return Ok(None);
        };
        let documents = match server.client_metadata_documents {
            true => Some(cimd::Documents::new(
                server.client_metadata_ca.as_deref(),
                server.client_metadata_private_hosts.clone(),
            )?),
            false => None,
        };
        let store = store::open(server, config.redis_target(crate::config::RedisUser::AuthServer))
            .map_err(|e| e.to_string())?;
        let mut this = AuthServer::new(server, config, resource, store);
        this.documents = documents;
        if let (LoginSource::Oidc, Some(oidc)) = (server.login, &server.oidc) {
            this.broker = Some(broker::Broker::new(oidc, &this.origin)?);
        }
        Ok(Some(Arc::new(this)))
    }

    fn new(server: &AuthServerConfig, config: &Config, resource: &ResourceServer, store: Arc<dyn Store>) -> AuthServer {
        let issuer = server.issuer(&config.listen);
        let origin = url::Url::parse(&issuer)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_else(|_| issuer.clone());
        let resource_scopes = config
            .auth
            .oauth
            .as_ref()
            .map(|o| o.advertised_scopes())
            .unwrap_or_default();
        let mut this = AuthServer {
            issuer,
            origin,
            config: server.clone(),
            store,
            resources: resource.resources(),
            resource_scopes,
            passwords: passwords::Passwords::new(
                server.users.iter().map(|u| (u.name.clone(), u.password_argon2.clone())),
            ),
            proxies: config.listen.trusted_proxies.clone(),
            client_ip_header: config.listen.client_ip_header,
            keys: RwLock::new(Arc::new(Vec::new())),
            published: resource.keys().clone(),
            metadata: Bytes::new(),
            pending: authorize::Pending::default(),
            registrations: Mutex::new(register::Registrations::default()),
            documents: None,
            attempts: login_attempts(server, config),
            broker: None,
        };
        this.metadata = Bytes::from(this.metadata_document().to_string());
        this
    }

    /// The issuer.
    pub(crate) fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Registers the static clients, makes (or loads) the signing keys and publishes
    /// them, then keeps rotating them and expiring unused registrations.
    pub(crate) async fn start(self: &Arc<Self>) -> Result<(), String> {
        let now = unix_now();
        let configured: Vec<String> = self.config.clients.iter().map(|c| c.client_id.clone()).collect();
        let forgotten = self
            .store
            .forget_static_clients(configured)
            .await
            .map_err(|e| e.to_string())?;
        if forgotten > 0 {
            tracing::info!(clients = forgotten, "forgot static clients no longer configured");
        }
        for client in &self.config.clients {
            let secret_sha256 = client.secret_sha256.as_deref().and_then(parse_hex);
            self.store
                .put_client(Client {
                    client_id: client.client_id.clone(),
                    secret_sha256,
                    redirect_uris: client.redirect_uris.clone(),
                    client_name: client.client_name.clone(),
                    origin: ClientOrigin::Static,
                    registered_at: now,
                    metadata: None,
                })
                .await
                .map_err(|e| e.to_string())?;
        }
        self.rotate(now).await?;
        if let Some(broker) = &self.broker {
            broker.start();
        }
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(HOUSEKEEPING).await;
                let Some(this) = this.upgrade() else { return };
                let now = unix_now();
                if let Err(error) = this.rotate(now).await {
                    tracing::warn!(%error, "rotating the authorization server's keys");
                }
                let expiry = this.config.registration_expiry.0.as_secs();
                match this.store.expire_clients(now.saturating_sub(expiry)).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(clients = n, "forgot unused client registrations"),
                    Err(error) => tracing::warn!(%error, "expiring client registrations"),
                }
                if let Err(error) = this.store.sweep(now).await {
                    tracing::warn!(%error, "forgetting expired codes and refresh tokens");
                }
            }
        });
        Ok(())
    }

    /// Rotates the keys if due (in the store, so replicas agree) and publishes them.
    async fn rotate(&self, now: u64) -> Result<(), String> {
        let stored = self.store.signing_keys().await.map_err(|e| e.to_string())?;
        let rotation = self.config.key_rotation.0.as_secs();
        let lifetime = self.config.access_token_lifetime.0.as_secs();
        let keys = match signing::rotated(&stored, now, rotation, lifetime) {
            Some(keys) => {
                // Compare and set: a replica that rotated first wins, and this one takes its keys.
                let keys = self
                    .store
                    .put_signing_keys(stored, keys)
                    .await
                    .map_err(|e| e.to_string())?;
                tracing::info!(keys = keys.len(), "the authorization server's signing keys changed");
                keys
            }
            None => stored,
        };
        let jwks = signing::jwks(&keys);
        self.published
            .publish(self.metadata.clone(), &self.url("jwks"), &jwks)?;
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
        Ok(())
    }

    /// The key that signs now ([`signing::current`]).
    fn signing_key(&self) -> Option<StoredKey> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner()).clone();
        signing::current(&keys, unix_now()).cloned()
    }

    /// The absolute URL of the endpoint `name` (`/oauth/NAME`).
    fn url(&self, name: &str) -> String {
        format!("{}{AUTH_SERVER_PREFIX}{name}", self.origin)
    }

    fn scopes_supported(&self) -> &[String] {
        if self.config.scopes_supported.is_empty() {
            &self.resource_scopes
        } else {
            &self.config.scopes_supported
        }
    }

    fn metadata_document(&self) -> Value {
        let mut scopes: Vec<String> = self.scopes_supported().to_vec();
        if self.config.offline_access {
            scopes.push("offline_access".into());
        }
        let mut document = json!({
            "issuer": self.issuer,
            "authorization_endpoint": self.url("authorize"),
            "token_endpoint": self.url("token"),
            "revocation_endpoint": self.url("revoke"),
            "jwks_uri": self.url("jwks"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "revocation_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "authorization_response_iss_parameter_supported": true,
            "client_id_metadata_document_supported": self.config.client_metadata_documents,
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["EdDSA"],
        });
        if !scopes.is_empty() {
            document["scopes_supported"] = json!(scopes);
        }
        if self.config.dynamic_registration {
            document["registration_endpoint"] = json!(self.url("register"));
        }
        document
    }

    /// The paths of the metadata documents (RFC 8414 §3.1 inserts `/.well-known/…`
    /// before the issuer's path; OpenID appends it).
    fn metadata_paths(&self) -> Vec<String> {
        let path = url::Url::parse(&self.issuer)
            .map(|u| u.path().trim_end_matches('/').to_owned())
            .unwrap_or_default();
        vec![
            format!("/.well-known/oauth-authorization-server{path}"),
            format!("{path}/.well-known/openid-configuration"),
            format!("/.well-known/openid-configuration{path}"),
        ]
    }

    /// Whether `path` is the authorization server's.
    pub(crate) fn owns(&self, path: &str) -> bool {
        path.starts_with(AUTH_SERVER_PREFIX) || self.metadata_paths().iter().any(|p| p == path)
    }

    /// Answers a request to one of its paths (the body already read, bounded).
    ///
    /// Every path takes the listener's `Host` check (421: a DNS-rebinding page
    /// names its own host). Cross-origin requests: the metadata and the JWKS are
    /// public and readable from any origin (browser-based clients discover and
    /// check with them); `/oauth/authorize` and `/oauth/callback` are top-level
    /// navigations from another site by design; `/oauth/login` and
    /// `/oauth/consent` are eragate's own forms, whose browser sends `Origin: null`
    /// (the pages' referrer policy is `no-referrer`), guarded by their
    /// transaction cookie (`SameSite=Lax`) and CSRF token instead. `/oauth/token`,
    /// `/oauth/revoke` and `/oauth/register` answer no browser of another origin
    /// (no CORS headers; a JSON registration's preflight is refused), so a
    /// foreign `Origin` there can only be a blind cross-site request: 403.
    pub(crate) async fn handle(&self, request: http::Request<Bytes>) -> Response {
        let path = request.uri().path().to_owned();
        let method = request.method().clone();
        let name = path.strip_prefix(AUTH_SERVER_PREFIX).unwrap_or_default();
        let api = matches!(name, "token" | "revoke" | "register");
        if let Some(refusal) = self.browser_refusal(&request, api) {
            return refusal;
        }
        if self.metadata_paths().contains(&path) {
            return match method {
                Method::GET => public_json(StatusCode::OK, self.metadata.clone()),
                _ => method_not_allowed("GET"),
            };
        }
        match (name, &method) {
            ("jwks", &Method::GET) => {
                let keys = self.keys.read().unwrap_or_else(|e| e.into_inner()).clone();
                public_json(StatusCode::OK, Bytes::from(signing::jwks(&keys)))
            }
            ("jwks", _) => method_not_allowed("GET"),
            ("authorize", &Method::GET) => self.authorize(&request).await,
            ("authorize", _) => method_not_allowed("GET"),
            ("callback", &Method::GET) => self.callback(&request).await,
            ("callback", _) => method_not_allowed("GET"),
            ("login", &Method::POST) => self.login(&request).await,
            ("consent", &Method::POST) => self.consent(&request).await,
            ("login" | "consent", _) => method_not_allowed("POST"),
            ("token", &Method::POST) => self.token(&request).await,
            ("revoke", &Method::POST) => self.revoke(&request).await,
            ("register", &Method::POST) if self.config.dynamic_registration => self.register(&request).await,
            ("token" | "revoke", _) => method_not_allowed("POST"),
            ("register", _) if self.config.dynamic_registration => method_not_allowed("POST"),
            _ => plain(StatusCode::NOT_FOUND, "not found"),
        }
    }
}

impl AuthServer {
    /// The refusal of a request that fails the browser checks it takes (see
    /// [`AuthServer::handle`]): 421 for a `Host` the listener does not serve, 403
    /// for a foreign `Origin` on an `api` endpoint.
    fn browser_refusal(&self, request: &http::Request<Bytes>, api: bool) -> Option<Response> {
        let checks = request.extensions().get::<BrowserChecks>()?;
        if !checks.host_allowed {
            tracing::debug!(host = ?request.headers().get(http::header::HOST), "authorization server: a foreign Host");
            let description = "this server does not serve the host the request names";
            return Some(if api {
                oauth_error(StatusCode::MISDIRECTED_REQUEST, "invalid_request", description)
            } else {
                plain(StatusCode::MISDIRECTED_REQUEST, "misdirected request: unknown host")
            });
        }
        let own = || {
            request
                .headers()
                .get(http::header::ORIGIN)
                .and_then(|o| o.to_str().ok())
                .is_some_and(|o| o.trim_end_matches('/').eq_ignore_ascii_case(&self.origin))
        };
        if api && !checks.origin_allowed && !own() {
            tracing::debug!(origin = ?request.headers().get(http::header::ORIGIN), "authorization server: a foreign Origin");
            return Some(oauth_error(
                StatusCode::FORBIDDEN,
                "invalid_request",
                "requests from this Origin are not accepted",
            ));
        }
        None
    }

    /// The address of the client that sent `request`: the peer's, or, when the
    /// peer is a trusted proxy, the client its forwarding header names.
    fn client_address(&self, request: &http::Request<Bytes>) -> Option<std::net::IpAddr> {
        let peer = request.extensions().get::<ClientIp>()?.0;
        Some(self.proxies.client(peer, request.headers(), self.client_ip_header))
    }
}

/// The login attempt limit of `server`: in Redis with `storage = "redis"` (every
/// replica sees the same counts), else in this process.
fn login_attempts(server: &AuthServerConfig, config: &Config) -> attempts::LoginAttempts {
    let (limit, window) = (server.login_attempts, server.login_attempts_window.0);
    match config.redis_target(crate::config::RedisUser::AuthServer) {
        Some(target) => {
            let prefix = target.prefix.clone();
            attempts::LoginAttempts::shared(limit, window, crate::store::redis::Pool::new(target), prefix)
        }
        None => attempts::LoginAttempts::new(limit, window),
    }
}

/// The Argon2id PHC string of `password` (a fresh salt each time); the empty
/// password is refused (it never signs in).
pub fn hash_password(password: &str) -> Result<String, String> {
    use argon2::PasswordHasher;
    if password.is_empty() {
        return Err("the password is empty: an empty password never signs in".into());
    }
    argon2::Argon2::default()
        .hash_password(password.as_bytes())
        .map(|hash| hash.to_string())
        .map_err(|e| e.to_string())
}

/// Seconds since the epoch.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// A monotonic instant (for in-memory expiry).
fn instant() -> Instant {
    Instant::now()
}

fn parse_hex(hex: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if hex.len() != 64 {
        return None;
    }
    for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

fn sha256(text: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
}

/// The parameters of a query or form body; `Err` names one given twice (RFC 6749 §3.1).
fn parameters(text: &[u8]) -> Result<HashMap<String, String>, String> {
    let mut map = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(text) {
        if map.insert(name.to_string(), value.to_string()).is_some() {
            return Err(format!("the parameter {name} is given more than once"));
        }
    }
    Ok(map)
}

fn with_type(status: StatusCode, body: Bytes, content_type: &'static str) -> Response {
    let mut response = http::Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A JSON document anyone may read and cache briefly (metadata, JWKS).
fn public_json(status: StatusCode, body: Bytes) -> Response {
    let mut response = with_type(status, body, "application/json");
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    headers.insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    response
}

/// A JSON answer that must not be cached (tokens, registrations, errors).
fn private_json(status: StatusCode, body: &Value) -> Response {
    let mut response = with_type(status, Bytes::from(body.to_string()), "application/json");
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// An OAuth error response (RFC 6749 §5.2).
fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    private_json(status, &json!({"error": error, "error_description": description}))
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    with_type(status, Bytes::from_static(text.as_bytes()), "text/plain; charset=utf-8")
}

fn method_not_allowed(allow: &'static str) -> Response {
    let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    response
        .headers_mut()
        .insert(http::header::ALLOW, HeaderValue::from_static(allow));
    response
}
