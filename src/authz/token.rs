//! `/oauth/token` (the `authorization_code` and `refresh_token` grants) and
//! `/oauth/revoke` (RFC 7009), with client authentication (`none`,
//! `client_secret_basic`, `client_secret_post`).
//!
//! Codes are single-use: a second use revokes the refresh-token family the first
//! produced. Refresh tokens rotate on every use; using one twice revokes its
//! whole family (OAuth 2.1 §4.3.1). Access tokens are short-lived JWTs.

use std::collections::HashMap;

use base64::Engine;
use bytes::Bytes;
use http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use http::{HeaderValue, StatusCode};
use serde_json::json;
use subtle::ConstantTimeEq;

use super::signing::{self, AccessClaims};
use super::store::{Client, Grant, Taken, TakenRefresh};
use super::{AuthServer, Response, oauth_error, parameters, private_json, rules, sha256, unix_now};

/// A refused token request: status, `error`, description.
type Refused = (StatusCode, &'static str, String);

fn bad(error: &'static str, description: impl Into<String>) -> Refused {
    (StatusCode::BAD_REQUEST, error, description.into())
}

impl AuthServer {
    /// POST `/oauth/token`.
    pub(super) async fn token(&self, request: &http::Request<Bytes>) -> Response {
        match self.token_inner(request).await {
            Ok(response) => response,
            Err((status, error, description)) => {
                let mut response = oauth_error(status, error, &description);
                if status == StatusCode::UNAUTHORIZED {
                    response
                        .headers_mut()
                        .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"eragate\""));
                }
                response
            }
        }
    }

    async fn token_inner(&self, request: &http::Request<Bytes>) -> Result<Response, Refused> {
        let params = parameters(request.body()).map_err(|why| bad("invalid_request", why))?;
        let client = self.authenticate_client(request, &params).await?;
        match params.get("grant_type").map(String::as_str) {
            Some("authorization_code") => self.code_grant(&client, &params).await,
            Some("refresh_token") => self.refresh_grant(&client, &params).await,
            Some(other) => Err(bad(
                "unsupported_grant_type",
                format!("grant_type {other:?} is not supported"),
            )),
            None => Err(bad("invalid_request", "grant_type is required")),
        }
    }

    async fn code_grant(&self, client: &Client, params: &HashMap<String, String>) -> Result<Response, Refused> {
        let get = |name: &str| params.get(name).map(String::as_str);
        let code = get("code").ok_or_else(|| bad("invalid_request", "code is required"))?;
        let digest = sha256(code);
        let grant = match self.store.take_code(digest).await.map_err(unavailable)? {
            Taken::Fresh(grant) => grant,
            Taken::Reused(family) => {
                if let Some(family) = family {
                    tracing::warn!(client = %client.client_id, "an authorization code was used twice: its tokens are revoked");
                    self.store.revoke_family(family).await.map_err(unavailable)?;
                }
                return Err(bad("invalid_grant", "the code was already used"));
            }
            Taken::Missing => return Err(bad("invalid_grant", "unknown code")),
        };
        if grant.client_id != client.client_id {
            return Err(bad("invalid_grant", "the code was issued to another client"));
        }
        if grant.expires_at < unix_now() {
            return Err(bad("invalid_grant", "the code has expired"));
        }
        if get("redirect_uri").is_some_and(|uri| uri != grant.redirect_uri) {
            return Err(bad(
                "invalid_grant",
                "redirect_uri differs from the authorization request's",
            ));
        }
        let verifier = get("code_verifier").ok_or_else(|| bad("invalid_grant", "code_verifier is required (PKCE)"))?;
        if !rules::pkce_matches(verifier, &grant.code_challenge) {
            return Err(bad(
                "invalid_grant",
                "the code_verifier does not match the code_challenge",
            ));
        }
        if get("resource").is_some_and(|r| r != grant.resource) {
            return Err(bad("invalid_target", "the code was granted for another resource"));
        }
        let family = signing::random_token();
        self.store
            .link_code(digest, family.clone())
            .await
            .map_err(unavailable)?;
        self.tokens(&grant, family).await
    }

    async fn refresh_grant(&self, client: &Client, params: &HashMap<String, String>) -> Result<Response, Refused> {
        let get = |name: &str| params.get(name).map(String::as_str);
        let token = get("refresh_token").ok_or_else(|| bad("invalid_request", "refresh_token is required"))?;
        let (family, grant) = match self.store.take_refresh(sha256(token)).await.map_err(unavailable)? {
            TakenRefresh::Fresh(family, grant) => (family, grant),
            TakenRefresh::Reused(_) => {
                tracing::warn!(client = %client.client_id, "a refresh token was used twice: its family is revoked");
                return Err(bad(
                    "invalid_grant",
                    "the refresh token was already used; its family is revoked",
                ));
            }
            TakenRefresh::Missing => return Err(bad("invalid_grant", "unknown refresh token")),
        };
        if grant.client_id != client.client_id {
            return Err(bad("invalid_grant", "the refresh token was issued to another client"));
        }
        if grant.expires_at < unix_now() {
            return Err(bad("invalid_grant", "the refresh token has expired"));
        }
        if get("resource").is_some_and(|r| r != grant.resource) {
            return Err(bad("invalid_target", "the grant is for another resource"));
        }
        let mut grant = grant;
        if let Some(scope) = get("scope") {
            let asked: Vec<String> = scope.split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect();
            if !asked.iter().all(|s| grant.scopes.contains(s)) {
                return Err(bad("invalid_scope", "a refresh can only narrow the granted scopes"));
            }
            grant.scopes = asked;
        }
        self.tokens(&grant, family).await
    }

    /// A new access token and refresh token (of `family`) for `grant`.
    async fn tokens(&self, grant: &Grant, family: String) -> Result<Response, Refused> {
        let now = unix_now();
        let lifetime = self.config.access_token_lifetime.0.as_secs();
        let scope = grant.scopes.join(" ");
        let claims = AccessClaims {
            iss: &self.issuer,
            sub: &grant.subject,
            aud: &grant.resource,
            client_id: &grant.client_id,
            iat: now,
            exp: now + lifetime,
            jti: signing::random_token(),
            scope: &scope,
        };
        let key = self.signing_key().ok_or_else(|| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "no signing key yet".to_owned(),
            )
        })?;
        let access_token =
            signing::sign(&key, &claims).map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, "server_error", e))?;
        let refresh_token = signing::random_token();
        let refreshed = Grant {
            expires_at: now + self.config.refresh_token_lifetime.0.as_secs(),
            ..grant.clone()
        };
        self.store
            .put_refresh(sha256(&refresh_token), family, refreshed)
            .await
            .map_err(unavailable)?;
        let mut body = json!({
            "access_token": access_token,
            "token_type": "Bearer",
            "expires_in": lifetime,
            "refresh_token": refresh_token,
        });
        if !scope.is_empty() {
            body["scope"] = json!(scope);
        }
        Ok(private_json(StatusCode::OK, &body))
    }

    /// POST `/oauth/revoke` (RFC 7009): a refresh token's whole family is revoked.
    /// Access tokens are short-lived JWTs and are not tracked; an unknown token is
    /// answered 200 as the RFC says.
    pub(super) async fn revoke(&self, request: &http::Request<Bytes>) -> Response {
        let params = match parameters(request.body()) {
            Ok(params) => params,
            Err(why) => return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", &why),
        };
        let client = match self.authenticate_client(request, &params).await {
            Ok(client) => client,
            Err((status, error, description)) => return oauth_error(status, error, &description),
        };
        let Some(token) = params.get("token") else {
            return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", "token is required");
        };
        match self.store.family_of(sha256(token)).await {
            Ok(Some((family, owner))) if owner == client.client_id => {
                if let Err(error) = self.store.revoke_family(family).await {
                    return oauth_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "temporarily_unavailable",
                        &error.to_string(),
                    );
                }
            }
            Ok(_) => {}
            Err(error) => {
                return oauth_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "temporarily_unavailable",
                    &error.to_string(),
                );
            }
        }
        private_json(StatusCode::OK, &json!({}))
    }

    /// The client of a token or revocation request: `client_secret_basic`,
    /// `client_secret_post`, or a public client naming itself.
    async fn authenticate_client(
        &self,
        request: &http::Request<Bytes>,
        params: &HashMap<String, String>,
    ) -> Result<Client, Refused> {
        let basic = request
            .headers()
            .get(AUTHORIZATION)
            .map(|v| basic_credentials(v.as_bytes()).ok_or_else(|| invalid_client("malformed Basic credentials")))
            .transpose()?;
        let (client_id, secret) = match basic {
            Some((id, secret)) => {
                if params.contains_key("client_secret") {
                    return Err(bad("invalid_request", "use one client authentication method"));
                }
                (id, Some(secret))
            }
            None => {
                let id = params
                    .get("client_id")
                    .cloned()
                    .ok_or_else(|| invalid_client("client_id is required"))?;
                (id, params.get("client_secret").cloned())
            }
        };
        let client = self
            .find_client(&client_id)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| invalid_client("unknown client"))?;
        match (&client.secret_sha256, secret) {
            (None, None) => Ok(client),
            (Some(expected), Some(secret)) if bool::from(sha256(&secret).ct_eq(expected)) => Ok(client),
            (None, Some(_)) => Err(invalid_client("a public client has no secret")),
            _ => Err(invalid_client("client authentication failed")),
        }
    }
}

fn invalid_client(description: &str) -> Refused {
    (StatusCode::UNAUTHORIZED, "invalid_client", description.to_owned())
}

fn unavailable(error: super::store::StoreError) -> Refused {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "temporarily_unavailable",
        error.to_string(),
    )
}

/// The id and secret of `Authorization: Basic …` (each form-urlencoded, RFC 6749 §2.3.1).
fn basic_credentials(value: &[u8]) -> Option<(String, String)> {
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim_ascii())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    let decode = |s: &str| {
        url::form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
    };
    Some((decode(id)?, decode(secret)?))
}
