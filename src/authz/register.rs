//! Clients: looked up in the store (static ones are put there at start), and
//! Dynamic Client Registration at `/oauth/register` (RFC 7591): `application_type`
//! decides which redirect URIs are allowed, the registration is echoed back,
//! registrations are rate-limited (per minute, in all and per client network, in
//! this process), and unused ones expire.

use std::collections::HashMap;
use std::net::IpAddr;

use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use super::rules::ApplicationType;
use super::store::{Client, ClientOrigin, StoreError};
use super::{AuthServer, Response, oauth_error, private_json, sha256, signing, unix_now};

/// Largest registration document accepted.
const MAX_REGISTRATION: usize = 16 * 1024;
/// Most redirect URIs of one client.
const MAX_REDIRECTS: usize = 20;

/// The registrations accepted this minute: in all, and per client network (an
/// IPv6 client by its /64). Only accepted ones are kept, so the map holds at
/// most `registrations_per_minute` entries.
#[derive(Default)]
pub(crate) struct Registrations {
    minute: u64,
    total: u32,
    per_network: HashMap<IpAddr, u32>,
}

impl AuthServer {
    /// The client `client_id`, if known (marked used now); `Err` when the store
    /// cannot be reached (not the client's fault: 503, not "unknown client").
    pub(super) async fn find_client(&self, client_id: &str) -> Result<Option<Client>, StoreError> {
        if client_id.starts_with("https://") {
            let Some(documents) = self.documents.as_ref() else {
                return Ok(None);
            };
            return match documents.client(client_id, unix_now()).await {
                Ok(client) => Ok(Some(client)),
                Err(why) => {
                    tracing::warn!(client = %client_id, reason = %why, "refused a client metadata document");
                    Ok(None)
                }
            };
        }
        self.store.client(client_id, unix_now()).await.inspect_err(|error| {
            tracing::warn!(%error, "looking a client up");
        })
    }

    /// POST `/oauth/register`.
    pub(super) async fn register(&self, request: &http::Request<Bytes>) -> Response {
        let network = self.client_address(request).map(super::attempts::network);
        if let Err(why) = self.registration_allowed(unix_now(), network) {
            tracing::info!(?network, "a registration refused: {why}");
            let mut response = oauth_error(StatusCode::TOO_MANY_REQUESTS, "temporarily_unavailable", why);
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("60"));
            return response;
        }
        let body = request.body();
        if body.len() > MAX_REGISTRATION {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_client_metadata",
                "the registration is too large",
            );
        }
        let metadata: Value = match serde_json::from_slice(body) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_client_metadata",
                    "the registration is not a JSON object",
                );
            }
        };
        match self.registered(metadata).await {
            Ok(response) => response,
            // The store cannot be reached: not the client's fault.
            Err((error @ "temporarily_unavailable", description)) => {
                oauth_error(StatusCode::SERVICE_UNAVAILABLE, error, &description)
            }
            Err((error, description)) => oauth_error(StatusCode::BAD_REQUEST, error, &description),
        }
    }

    async fn registered(&self, mut metadata: Value) -> Result<Response, (&'static str, String)> {
        let invalid = |d: String| ("invalid_client_metadata", d);
        let kind = ApplicationType::parse(metadata.get("application_type").and_then(Value::as_str)).map_err(invalid)?;
        let uris: Vec<String> = match metadata.get("redirect_uris") {
            Some(Value::Array(items)) if !items.is_empty() && items.len() <= MAX_REDIRECTS => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| ("invalid_redirect_uri", "redirect_uris holds a non-string".to_owned()))?,
            _ => {
                return Err((
                    "invalid_redirect_uri",
                    format!("redirect_uris must list 1 to {MAX_REDIRECTS} URIs"),
                ));
            }
        };
        if let Some(why) = uris.iter().find_map(|uri| kind.refuses(uri)) {
            return Err((
                "invalid_redirect_uri",
                format!("{why} (application_type {})", kind.as_str()),
            ));
        }
        for (key, allowed) in [
            ("grant_types", &["authorization_code", "refresh_token"][..]),
            ("response_types", &["code"][..]),
        ] {
            if let Some(values) = metadata.get(key) {
                let ok = values
                    .as_array()
                    .is_some_and(|a| a.iter().all(|v| v.as_str().is_some_and(|s| allowed.contains(&s))));
                if !ok {
                    return Err(invalid(format!("{key} may hold only {}", allowed.join(", "))));
                }
            }
        }
        let method = metadata
            .get("token_endpoint_auth_method")
            .and_then(Value::as_str)
            .unwrap_or("client_secret_basic")
            .to_owned();
        let secret = match method.as_str() {
            "none" => None,
            "client_secret_basic" | "client_secret_post" => Some(signing::random_token()),
            other => {
                return Err(invalid(format!(
                    "token_endpoint_auth_method {other:?} is not supported"
                )));
            }
        };
        let now = unix_now();
        let client_id = format!("dcr-{}", signing::random_token());
        metadata["client_id"] = json!(client_id);
        metadata["client_id_issued_at"] = json!(now);
        metadata["application_type"] = json!(kind.as_str());
        metadata["token_endpoint_auth_method"] = json!(method);
        if metadata.get("grant_types").is_none() {
            metadata["grant_types"] = json!(["authorization_code", "refresh_token"]);
        }
        if metadata.get("response_types").is_none() {
            metadata["response_types"] = json!(["code"]);
        }
        let client = Client {
            client_id: client_id.clone(),
            secret_sha256: secret.as_deref().map(sha256),
            redirect_uris: uris,
            client_name: metadata.get("client_name").and_then(Value::as_str).map(str::to_owned),
            origin: ClientOrigin::Dynamic,
            registered_at: now,
            metadata: Some(metadata.clone()),
        };
        self.store
            .put_client(client)
            .await
            .map_err(|e| ("temporarily_unavailable", e.to_string()))?;
        if let Some(secret) = secret {
            metadata["client_secret"] = json!(secret);
            metadata["client_secret_expires_at"] = json!(0);
        }
        tracing::info!(client = %client_id, application_type = kind.as_str(), "registered a client");
        Ok(private_json(StatusCode::CREATED, &metadata))
    }

    /// One more registration this minute from `network`, if both limits allow it;
    /// else which one refuses.
    fn registration_allowed(&self, now: u64, network: Option<IpAddr>) -> Result<(), &'static str> {
        let mut window = self.registrations.lock().unwrap_or_else(|e| e.into_inner());
        let minute = now / 60;
        if window.minute != minute {
            *window = Registrations {
                minute,
                ..Registrations::default()
            };
        }
        let from_there = network.and_then(|n| window.per_network.get(&n).copied()).unwrap_or(0);
        if from_there >= self.config.registrations_per_minute_per_ip {
            return Err("too many registrations from your address; try again in a minute");
        }
        if window.total >= self.config.registrations_per_minute {
            return Err("too many registrations; try again in a minute");
        }
        window.total += 1;
        if let Some(network) = network {
            *window.per_network.entry(network).or_insert(0) += 1;
        }
        Ok(())
    }
}
