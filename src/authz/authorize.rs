//! `/oauth/authorize` (authorization code with PKCE S256 only), the login form
//! (`/oauth/login`, local users with Argon2id) and the consent form
//! (`/oauth/consent`, remembered per user, client and resource).
//!
//! A request that names no known client or redirect URI gets an error page, never
//! a redirect; every later error is a redirect carrying `error`, `state` and `iss`
//! (RFC 9207), as is every code. Between the pages, the request waits here as a
//! pending transaction, bound to the browser by a cookie and to each form by a
//! CSRF token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CACHE_CONTROL, COOKIE, LOCATION, SET_COOKIE};
use http::{HeaderValue, StatusCode};
use subtle::ConstantTimeEq;

use super::broker::Upstream;
use super::store::{Client, ClientOrigin, Consent, Grant};
use super::{AuthServer, Response, instant, pages, parameters, rules, sha256, signing, unix_now};

/// How long a user may take between the pages.
const PENDING_FOR: Duration = Duration::from_secs(600);
/// Most pending transactions.
const MAX_PENDING: usize = 10_000;
/// The cookie binding a transaction to the browser that started it.
const COOKIE_NAME: &str = "eragate_txn";

/// An authorization request that passed every check.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    client_id: String,
    client_name: String,
    /// Whether the operator named the client (a configured one).
    name_verified: bool,
    /// The URL of the client's metadata document (a CIMD client).
    document: Option<String>,
    /// Where the code goes, as the consent page says it ([`destination`]).
    destination: String,
    redirect_uri: String,
    state: Option<String>,
    code_challenge: String,
    resource: String,
    scopes: Vec<String>,
}

impl Request {
    /// What the pages say about its client.
    fn shown(&self) -> pages::Shown<'_> {
        pages::Shown {
            name: &self.client_name,
            verified: self.name_verified,
            destination: &self.destination,
            document: self.document.as_deref(),
        }
    }
}

/// Where a code sent to `redirect_uri` goes, as a person reads it: its host (and
/// port), noting a loopback one is this computer; or, for a private-use scheme
/// (`com.example.app:/cb`), the app that scheme opens.
fn destination(redirect_uri: &str) -> String {
    let Ok(url) = url::Url::parse(redirect_uri) else {
        return redirect_uri.to_owned();
    };
    let Some(host) = url.host_str() else {
        return format!("the application that opens {}: links", url.scheme());
    };
    let place = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    if loopback {
        format!("{place} (an application on this computer)")
    } else {
        place
    }
}

struct Transaction {
    request: Request,
    csrf: String,
    subject: Option<String>,
    /// A brokered sign-in waiting for the provider's callback.
    upstream: Option<Upstream>,
    until: Instant,
}

/// The transactions waiting for a login or a consent (bounded, expiring).
#[derive(Default)]
pub(crate) struct Pending(Mutex<HashMap<String, Transaction>>);

impl Pending {
    fn insert(&self, request: Request) -> (String, String) {
        let (txn, csrf) = (signing::random_token(), signing::random_token());
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = instant();
        if map.len() >= MAX_PENDING {
            map.retain(|_, t| t.until > now);
        }
        if map.len() >= MAX_PENDING {
            // Full of live transactions: the oldest goes.
            if let Some(oldest) = map.iter().min_by_key(|(_, t)| t.until).map(|(k, _)| k.clone()) {
                map.remove(&oldest);
            }
        }
        let transaction = Transaction {
            request,
            csrf: csrf.clone(),
            subject: None,
            upstream: None,
            until: now + PENDING_FOR,
        };
        map.insert(txn.clone(), transaction);
        (txn, csrf)
    }

    /// The transaction `txn`, if it is live and `csrf` is its token.
    fn check(&self, txn: &str, csrf: &str) -> Option<(Request, Option<String>)> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let t = map.get(txn).filter(|t| t.until > instant())?;
        bool::from(t.csrf.as_bytes().ct_eq(csrf.as_bytes())).then(|| (t.request.clone(), t.subject.clone()))
    }

    fn expect_callback(&self, txn: &str, upstream: Upstream) {
        if let Some(t) = self.0.lock().unwrap_or_else(|e| e.into_inner()).get_mut(txn) {
            t.upstream = Some(upstream);
        }
    }

    /// The live transaction `txn` waiting for the callback whose `state` this is;
    /// its upstream part is taken (a callback is single-use).
    fn take_callback(&self, txn: &str, state: &str) -> Option<(Request, Upstream)> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let t = map.get_mut(txn).filter(|t| t.until > instant())?;
        let matches = t
            .upstream
            .as_ref()
            .is_some_and(|u| bool::from(u.state.as_bytes().ct_eq(state.as_bytes())));
        if !matches {
            return None;
        }
        let upstream = t.upstream.take()?;
        Some((t.request.clone(), upstream))
    }

    fn sign_in(&self, txn: &str, subject: &str) {
        if let Some(t) = self.0.lock().unwrap_or_else(|e| e.into_inner()).get_mut(txn) {
            t.subject = Some(subject.to_owned());
        }
    }

    fn finish(&self, txn: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(txn);
    }
}

/// A login or consent form of a live transaction.
struct Form {
    params: HashMap<String, String>,
    txn: String,
    request: Request,
    subject: Option<String>,
}

/// An OAuth error to send back to the client's redirect URI.
struct Refusal(&'static str, String);

impl AuthServer {
    /// GET `/oauth/authorize`.
    pub(super) async fn authorize(&self, request: &http::Request<Bytes>) -> Response {
        let query = request.uri().query().unwrap_or_default();
        let params = match parameters(query.as_bytes()) {
            Ok(params) => params,
            Err(why) => return error_page(StatusCode::BAD_REQUEST, &why),
        };
        let get = |name: &str| params.get(name).map(String::as_str);
        let Some(client_id) = get("client_id") else {
            return error_page(StatusCode::BAD_REQUEST, "The request names no client (client_id).");
        };
        let client = match self.find_client(client_id).await {
            Ok(Some(client)) => client,
            Ok(None) => return error_page(StatusCode::BAD_REQUEST, "The application is not registered here."),
            Err(_) => {
                return error_page(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The sign-in service is unavailable right now. Try again in a moment.",
                );
            }
        };
        let redirect_uri = match get("redirect_uri") {
            Some(uri) if rules::redirect_matches(&client.redirect_uris, uri) => uri.to_owned(),
            None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
            _ => {
                return error_page(
                    StatusCode::BAD_REQUEST,
                    "The redirect URI is not one the application registered.",
                );
            }
        };
        let state = get("state").map(str::to_owned);
        let checked = self.check_request(&params, &client);
        let request = match checked {
            Ok((code_challenge, resource, scopes)) => Request {
                client_name: client.client_name.clone().unwrap_or_else(|| client.client_id.clone()),
                name_verified: client.origin == ClientOrigin::Static,
                document: (client.origin == ClientOrigin::MetadataDocument).then(|| client.client_id.clone()),
                destination: destination(&redirect_uri),
                client_id: client.client_id,
                redirect_uri,
                state,
                code_challenge,
                resource,
                scopes,
            },
            Err(Refusal(error, description)) => {
                return self.redirect_error(&redirect_uri, state.as_deref(), error, &description, StatusCode::FOUND);
            }
        };
        let (txn, csrf) = self.pending.insert(request.clone());
        let mut response = match &self.broker {
            None => {
                let html = pages::login(&self.path("login"), &txn, &csrf, &request.shown(), None);
                html_response(StatusCode::OK, html)
            }
            Some(broker) => match broker.redirect().await {
                Ok((location, upstream)) => {
                    self.pending.expect_callback(&txn, upstream);
                    redirect(&location, &[], StatusCode::FOUND)
                }
                Err(error) => {
                    tracing::warn!(%error, "brokered login");
                    self.pending.finish(&txn);
                    return self.redirect_error(
                        &request.redirect_uri,
                        request.state.as_deref(),
                        "temporarily_unavailable",
                        "the identity provider cannot be reached",
                        StatusCode::FOUND,
                    );
                }
            },
        };
        let cookie = format!(
            "{COOKIE_NAME}={txn}; Path=/oauth/; HttpOnly; SameSite=Lax; Max-Age=600{}",
            self.secure()
        );
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(SET_COOKIE, value);
        }
        response
    }

    /// The checks after the client and redirect URI are known: PKCE, `resource`, scopes.
    fn check_request(
        &self,
        params: &HashMap<String, String>,
        client: &Client,
    ) -> Result<(String, String, Vec<String>), Refusal> {
        let get = |name: &str| params.get(name).map(String::as_str);
        if get("response_type") != Some("code") {
            return Err(Refusal(
                "unsupported_response_type",
                "only response_type=code is supported".into(),
            ));
        }
        if get("code_challenge_method") != Some("S256") {
            return Err(Refusal(
                "invalid_request",
                "PKCE is required, with code_challenge_method=S256".into(),
            ));
        }
        let challenge = get("code_challenge")
            .filter(|c| rules::is_challenge(c))
            .ok_or_else(|| Refusal("invalid_request", "code_challenge must be an S256 challenge".into()))?;
        let resource =
            get("resource").ok_or_else(|| Refusal("invalid_target", "resource is required (RFC 8707)".into()))?;
        if !self.resources.iter().any(|r| r == resource) {
            return Err(Refusal(
                "invalid_target",
                format!("{resource} is not a resource of this server"),
            ));
        }
        let scopes: Vec<String> = get("scope")
            .unwrap_or_default()
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let supported = self.scopes_supported();
        for scope in &scopes {
            let known = match scope.as_str() {
                "offline_access" => self.config.offline_access,
                _ => supported.is_empty() || supported.contains(scope),
            };
            if !known {
                return Err(Refusal(
                    "invalid_scope",
                    format!("the scope {scope:?} is not available"),
                ));
            }
        }
        let _ = client;
        Ok((challenge.to_owned(), resource.to_owned(), scopes))
    }

    /// POST `/oauth/login`.
    pub(super) async fn login(&self, request: &http::Request<Bytes>) -> Response {
        if self.broker.is_some() {
            return error_page(StatusCode::BAD_REQUEST, "Sign in at the identity provider.");
        }
        let Form {
            params,
            txn,
            request: req,
            ..
        } = match self.form_transaction(request) {
            Ok(found) => found,
            Err(response) => return *response,
        };
        let username = params.get("username").map(String::as_str).unwrap_or_default();
        let password = params.get("password").map(String::as_str).unwrap_or_default();
        let ip = self.client_address(request);
        // A turn first: a sign-in answered "busy" is not counted against the name.
        let Some(turn) = self.passwords.turn(ip.map(super::attempts::network)) else {
            tracing::warn!(?ip, "a login refused: too many sign-ins from one network at once");
            let message = "Too many sign-ins from your network at once. Try again in a moment.";
            return self.login_refused(&txn, &req, Duration::from_secs(1), message);
        };
        if let Some(wait) = self.attempts.begin(username, ip, instant()).await {
            tracing::warn!(user = %username, ?ip, "a login refused: too many failed attempts");
            let message = format!("Too many attempts. Try again in {} seconds.", whole_seconds(wait));
            return self.login_refused(&txn, &req, wait, &message);
        }
        if !turn.check(username, password).await {
            tracing::info!(user = %username, client = %req.client_id, "a failed login");
            let (txn, csrf) = (txn.clone(), self.renew_csrf(&txn));
            let html = pages::login(
                &self.path("login"),
                &txn,
                &csrf,
                &req.shown(),
                Some("The username or password is not right."),
            );
            return html_response(StatusCode::OK, html);
        }
        self.attempts.succeeded(username, ip).await;
        self.signed_in(&txn, &req, username).await
    }

    /// The login page again, answered 429 with `Retry-After` and `message`.
    fn login_refused(&self, txn: &str, req: &Request, wait: Duration, message: &str) -> Response {
        let csrf = self.renew_csrf(txn);
        let html = pages::login(&self.path("login"), txn, &csrf, &req.shown(), Some(message));
        let mut response = html_response(StatusCode::TOO_MANY_REQUESTS, html);
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from(whole_seconds(wait)));
        response
    }

    /// After `subject` signed in for `txn`: a code if they consented to this
    /// client and these scopes before, else the consent page.
    async fn signed_in(&self, txn: &str, req: &Request, subject: &str) -> Response {
        self.pending.sign_in(txn, subject);
        let remembered = self
            .store
            .consent(subject, &req.client_id, &req.resource)
            .await
            .ok()
            .flatten();
        if remembered.is_some_and(|granted| req.scopes.iter().all(|s| granted.contains(s))) {
            self.pending.finish(txn);
            return self.issue_code(req, subject).await;
        }
        let csrf = self.renew_csrf(txn);
        let html = pages::consent(
            &self.path("consent"),
            txn,
            &csrf,
            &req.shown(),
            subject,
            &req.resource,
            &req.scopes,
        );
        html_response(StatusCode::OK, html)
    }

    /// GET `/oauth/callback`: the identity provider's answer to a brokered sign-in.
    pub(super) async fn callback(&self, request: &http::Request<Bytes>) -> Response {
        let Some(broker) = &self.broker else {
            return error_page(StatusCode::NOT_FOUND, "There is no identity provider here.");
        };
        let params = match parameters(request.uri().query().unwrap_or_default().as_bytes()) {
            Ok(params) => params,
            Err(why) => return error_page(StatusCode::BAD_REQUEST, &why),
        };
        let get = |name: &str| params.get(name).map(String::as_str);
        let txn = cookie(request.headers(), COOKIE_NAME).unwrap_or_default();
        let Some((req, upstream)) = self.pending.take_callback(&txn, get("state").unwrap_or_default()) else {
            return error_page(
                StatusCode::BAD_REQUEST,
                "This sign-in expired, was already completed, or was started in another browser.",
            );
        };
        let refuse = |error: &str, description: &str| {
            self.pending.finish(&txn);
            self.redirect_error(
                &req.redirect_uri,
                req.state.as_deref(),
                error,
                description,
                StatusCode::SEE_OTHER,
            )
        };
        if let Some(error) = get("error") {
            tracing::info!(%error, client = %req.client_id, "the identity provider refused a sign-in");
            return refuse("access_denied", "the identity provider did not sign the user in");
        }
        let Some(code) = get("code") else {
            return refuse("access_denied", "the identity provider sent no code");
        };
        match broker.principal(code, get("iss"), &upstream).await {
            Ok(subject) => {
                tracing::info!(user = %subject, client = %req.client_id, "signed in at the identity provider");
                self.signed_in(&txn, &req, &subject).await
            }
            Err(error @ super::broker::BrokerError::Unavailable(_)) => {
                tracing::warn!(%error, "brokered login");
                refuse("temporarily_unavailable", "the identity provider cannot be reached")
            }
            Err(error) => {
                tracing::warn!(%error, client = %req.client_id, "a brokered sign-in was refused");
                refuse("access_denied", "the identity provider's answer was not valid")
            }
        }
    }

    /// POST `/oauth/consent`.
    pub(super) async fn consent(&self, request: &http::Request<Bytes>) -> Response {
        let Form {
            params,
            txn,
            request: req,
            subject,
        } = match self.form_transaction(request) {
            Ok(found) => found,
            Err(response) => return *response,
        };
        let Some(subject) = subject else {
            return error_page(StatusCode::BAD_REQUEST, "Sign in first.");
        };
        self.pending.finish(&txn);
        if params.get("decision").map(String::as_str) != Some("allow") {
            return self.redirect_error(
                &req.redirect_uri,
                req.state.as_deref(),
                "access_denied",
                "the user denied the request",
                StatusCode::SEE_OTHER,
            );
        }
        let mut granted = self
            .store
            .consent(&subject, &req.client_id, &req.resource)
            .await
            .ok()
            .flatten()
            .unwrap_or_default();
        for scope in &req.scopes {
            if !granted.contains(scope) {
                granted.push(scope.clone());
            }
        }
        let consent = Consent {
            subject: subject.clone(),
            client_id: req.client_id.clone(),
            resource: req.resource.clone(),
            scopes: granted,
        };
        if let Err(error) = self.store.put_consent(consent).await {
            tracing::warn!(%error, "remembering a consent");
        }
        self.issue_code(&req, &subject).await
    }

    /// The form's parameters and its live transaction, checked against the cookie
    /// and the CSRF token.
    fn form_transaction(&self, request: &http::Request<Bytes>) -> Result<Form, Box<Response>> {
        let params = parameters(request.body()).map_err(|why| Box::new(error_page(StatusCode::BAD_REQUEST, &why)))?;
        let txn = params.get("txn").cloned().unwrap_or_default();
        let csrf = params.get("csrf").map(String::as_str).unwrap_or_default();
        let cookie = cookie(request.headers(), COOKIE_NAME).unwrap_or_default();
        let expired = || {
            Box::new(error_page(
                StatusCode::BAD_REQUEST,
                "This sign-in expired or was started in another browser.",
            ))
        };
        if txn.is_empty() || !bool::from(cookie.as_bytes().ct_eq(txn.as_bytes())) {
            return Err(expired());
        }
        let (request, subject) = self.pending.check(&txn, csrf).ok_or_else(expired)?;
        Ok(Form {
            params,
            txn,
            request,
            subject,
        })
    }

    fn renew_csrf(&self, txn: &str) -> String {
        let csrf = signing::random_token();
        if let Some(t) = self.pending.0.lock().unwrap_or_else(|e| e.into_inner()).get_mut(txn) {
            t.csrf = csrf.clone();
        }
        csrf
    }

    /// A code for `req`, sent to its redirect URI.
    async fn issue_code(&self, req: &Request, subject: &str) -> Response {
        let code = signing::random_token();
        let grant = Grant {
            client_id: req.client_id.clone(),
            subject: subject.to_owned(),
            redirect_uri: req.redirect_uri.clone(),
            code_challenge: req.code_challenge.clone(),
            resource: req.resource.clone(),
            scopes: req.scopes.clone(),
            expires_at: unix_now() + self.config.code_lifetime.0.as_secs(),
        };
        if let Err(error) = self.store.put_code(sha256(&code), grant).await {
            tracing::warn!(%error, "storing an authorization code");
            return self.redirect_error(
                &req.redirect_uri,
                req.state.as_deref(),
                "temporarily_unavailable",
                "the authorization server cannot store the code",
                StatusCode::SEE_OTHER,
            );
        }
        let mut params = vec![("code", code.as_str())];
        if let Some(state) = &req.state {
            params.push(("state", state));
        }
        params.push(("iss", &self.issuer));
        redirect(&req.redirect_uri, &params, StatusCode::SEE_OTHER)
    }

    /// An error sent to the client's redirect URI, with `state` and `iss`.
    fn redirect_error(
        &self,
        redirect_uri: &str,
        state: Option<&str>,
        error: &str,
        description: &str,
        status: StatusCode,
    ) -> Response {
        let mut params = vec![("error", error), ("error_description", description)];
        if let Some(state) = state {
            params.push(("state", state));
        }
        params.push(("iss", &self.issuer));
        redirect(redirect_uri, &params, status)
    }

    /// The path of the endpoint `name`, for forms.
    fn path(&self, name: &str) -> String {
        format!("{}{name}", crate::config::AUTH_SERVER_PREFIX)
    }

    fn secure(&self) -> &'static str {
        if self.issuer.starts_with("https://") {
            "; Secure"
        } else {
            ""
        }
    }
}

/// `wait` in whole seconds, rounded up, at least one.
fn whole_seconds(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

fn redirect(base: &str, params: &[(&str, &str)], status: StatusCode) -> Response {
    let location = match url::Url::parse(base) {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(params);
            url.to_string()
        }
        Err(_) => return error_page(StatusCode::BAD_REQUEST, "The redirect URI is not a URI."),
    };
    let mut response = http::Response::new(Bytes::new());
    *response.status_mut() = status;
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(LOCATION, value);
    }
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn html_response(status: StatusCode, html: String) -> Response {
    let mut response = super::with_type(status, Bytes::from(html), "text/html; charset=utf-8");
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // The pages may not be framed (clickjacking) and load nothing from elsewhere.
    headers.insert(
        http::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"),
    );
    headers.insert(http::header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

fn error_page(status: StatusCode, message: &str) -> Response {
    html_response(status, pages::error(message))
}

/// The value of the cookie `name`.
fn cookie(headers: &http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_destination_names_the_host_a_code_goes_to() {
        let cases = [
            ("https://app.example.com/cb", "app.example.com"),
            ("https://app.example.com:8443/cb", "app.example.com:8443"),
            (
                "http://127.0.0.1:9/callback",
                "127.0.0.1:9 (an application on this computer)",
            ),
            ("http://[::1]/cb", "[::1] (an application on this computer)"),
            (
                "http://localhost:3000/cb",
                "localhost:3000 (an application on this computer)",
            ),
            (
                "com.example.app:/cb",
                "the application that opens com.example.app: links",
            ),
        ];
        for (uri, expected) in cases {
            assert_eq!(destination(uri), expected, "{uri}");
        }
    }
}
