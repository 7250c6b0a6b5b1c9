//! The pure part of eragate as an OAuth client: when a cached access token is
//! fresh, due for refresh ahead of its expiry, or expired; the token request
//! forms (client credentials, RFC 8693 token exchange) and how the client
//! authenticates; reading a token response. No I/O.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde::Deserialize;

/// RFC 8693 grant type.
pub(crate) const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693 token type of an access token.
pub(crate) const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// Refreshed no later than this long before expiry.
const REFRESH_MARGIN: Duration = Duration::from_secs(30);
/// A token without `expires_in` is kept this long (or until the upstream refuses it).
const ASSUMED_LIFETIME: Duration = Duration::from_secs(3600);

/// What to do with a cached token at some instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Use it.
    Fresh,
    /// Use it, and get the next one now (in the background), before it expires.
    RefreshAhead,
    /// Do not use it: get another first.
    Expired,
}

/// An access token eragate holds for an upstream (its `Debug` shows no token).
#[derive(Clone)]
pub(crate) struct HeldToken {
    /// The token.
    pub(crate) value: String,
    /// When it was obtained.
    pub(crate) obtained: Instant,
    /// `expires_in`, if the server said.
    pub(crate) lifetime: Option<Duration>,
}

impl std::fmt::Debug for HeldToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldToken")
            .field("obtained", &self.obtained)
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

impl HeldToken {
    /// Its freshness at `now`: refreshed at 80 % of its lifetime or 30 s before
    /// its expiry, whichever comes first (but not before half its lifetime, so a
    /// short-lived token is not replaced on every use); expired from its expiry on.
    pub(crate) fn freshness(&self, now: Instant) -> Freshness {
        let lifetime = self.lifetime.unwrap_or(ASSUMED_LIFETIME);
        let age = now.saturating_duration_since(self.obtained);
        let before_expiry = lifetime.saturating_sub(REFRESH_MARGIN).max(lifetime / 2);
        let refresh_at = lifetime.mul_f64(0.8).min(before_expiry);
        if age >= lifetime {
            Freshness::Expired
        } else if age >= refresh_at {
            Freshness::RefreshAhead
        } else {
            Freshness::Fresh
        }
    }
}

/// How eragate authenticates at the token endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AuthMethod {
    /// `client_secret_basic`: HTTP Basic (RFC 6749 §2.3.1).
    Basic,
    /// `client_secret_post`: `client_id` and `client_secret` in the form.
    Post,
    /// `none`: a public client, `client_id` in the form.
    None,
}

impl AuthMethod {
    /// The method for a client with (or without) a secret, given the server's
    /// `token_endpoint_auth_methods_supported` (absent: `client_secret_basic`, RFC 8414 §2).
    pub(crate) fn choose(has_secret: bool, supported: Option<&[String]>) -> AuthMethod {
        let offers = |name: &str| supported.is_none_or(|list| list.iter().any(|m| m == name));
        if !has_secret {
            AuthMethod::None
        } else if offers("client_secret_basic") {
            AuthMethod::Basic
        } else if supported.is_some_and(|list| list.iter().any(|m| m == "client_secret_post")) {
            AuthMethod::Post
        } else {
            AuthMethod::Basic
        }
    }

    /// The registration metadata name (RFC 7591 `token_endpoint_auth_method`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AuthMethod::Basic => "client_secret_basic",
            AuthMethod::Post => "client_secret_post",
            AuthMethod::None => "none",
        }
    }
}

/// eragate's client at one authorization server (its `Debug` shows no secret).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ClientAuth {
    /// `client_id`.
    pub(crate) id: String,
    /// The secret, for a confidential client.
    pub(crate) secret: Option<String>,
    /// How it authenticates.
    pub(crate) method: AuthMethod,
    /// When a registered client's secret expires (RFC 7591 `client_secret_expires_at`;
    /// `None`: never, or a configured client).
    pub(crate) secret_expires: Option<SystemTime>,
}

/// A registered client is registered anew this long before its secret expires.
const RENEW_REGISTRATION_AHEAD: Duration = Duration::from_secs(60);

impl ClientAuth {
    /// Whether the client must be registered anew at `now` (its secret expires soon).
    pub(crate) fn expired(&self, now: SystemTime) -> bool {
        self.secret_expires
            .is_some_and(|at| now + RENEW_REGISTRATION_AHEAD >= at)
    }
}

/// `client_secret_expires_at` (seconds since the epoch; 0 means never, RFC 7591 §3.2.1).
pub(crate) fn secret_expiry(expires_at: Option<u64>) -> Option<SystemTime> {
    match expires_at {
        None | Some(0) => None,
        Some(seconds) => Some(UNIX_EPOCH + Duration::from_secs(seconds)),
    }
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAuth")
            .field("id", &self.id)
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

/// What a token request asks for.
#[derive(Clone, Copy)]
pub(crate) enum Grant<'a> {
    /// Client credentials: a token for eragate itself.
    ClientCredentials,
    /// RFC 8693: `subject_token` (a client's access token) exchanged.
    Exchange {
        /// The client's access token.
        subject_token: &'a str,
        /// RFC 8693 `audience`, when configured.
        audience: Option<&'a str>,
    },
}

/// A token request's form body and, for `client_secret_basic`, its Basic credentials.
pub(crate) fn token_form(
    grant: Grant<'_>,
    scope: Option<&str>,
    resource: &str,
    client: &ClientAuth,
) -> (String, Option<String>) {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    match grant {
        Grant::ClientCredentials => {
            form.append_pair("grant_type", "client_credentials");
        }
        Grant::Exchange {
            subject_token,
            audience,
        } => {
            form.append_pair("grant_type", TOKEN_EXCHANGE_GRANT)
                .append_pair("subject_token", subject_token)
                .append_pair("subject_token_type", ACCESS_TOKEN_TYPE)
                .append_pair("requested_token_type", ACCESS_TOKEN_TYPE);
            if let Some(audience) = audience {
                form.append_pair("audience", audience);
            }
        }
    }
    form.append_pair("resource", resource);
    if let Some(scope) = scope {
        form.append_pair("scope", scope);
    }
    let basic = match (client.method, &client.secret) {
        (AuthMethod::Basic, Some(secret)) => {
            // RFC 6749 §2.3.1: each part form-urlencoded before Basic.
            let pair = format!("{}:{}", form_encode(&client.id), form_encode(secret));
            Some(base64::engine::general_purpose::STANDARD.encode(pair))
        }
        (AuthMethod::Post, Some(secret)) => {
            form.append_pair("client_id", &client.id)
                .append_pair("client_secret", secret);
            None
        }
        _ => {
            form.append_pair("client_id", &client.id);
            None
        }
    };
    (form.finish(), basic)
}

fn form_encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A successful token response (RFC 6749 §5.1).
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    token_type: String,
    #[serde(default)]
    expires_in: Option<f64>,
}

/// The token in a token endpoint's answer `body`, obtained at `now`; `Err` says what is wrong.
pub(crate) fn read_token_response(body: &[u8], now: Instant) -> Result<HeldToken, String> {
    let response: TokenResponse = serde_json::from_slice(body).map_err(|e| format!("not a token response ({e})"))?;
    if !response.token_type.eq_ignore_ascii_case("bearer") {
        return Err(format!(
            "token type {:?} cannot be sent as a bearer token",
            response.token_type
        ));
    }
    if response.access_token.is_empty() {
        return Err("an empty access token".into());
    }
    let lifetime = response
        .expires_in
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(1e9)));
    Ok(HeldToken {
        value: response.access_token,
        obtained: now,
        lifetime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_ahead_then_expire() {
        let start = Instant::now();
        let secs = Duration::from_secs;
        let token = |lifetime: Option<u64>| HeldToken {
            value: "t".into(),
            obtained: start,
            lifetime: lifetime.map(secs),
        };
        // (lifetime, age, freshness)
        let cases = [
            (Some(600), 0, Freshness::Fresh),
            (Some(600), 479, Freshness::Fresh),
            (Some(600), 480, Freshness::RefreshAhead), // 80 % of 10 min
            (Some(600), 599, Freshness::RefreshAhead),
            (Some(600), 600, Freshness::Expired),
            (Some(3600), 2879, Freshness::Fresh),
            (Some(3600), 2880, Freshness::RefreshAhead),
            (Some(100), 69, Freshness::Fresh),
            (Some(100), 70, Freshness::RefreshAhead), // 30 s before
            (Some(10), 4, Freshness::Fresh),
            (Some(10), 5, Freshness::RefreshAhead), // half of it
            (Some(10), 10, Freshness::Expired),
            (Some(1), 0, Freshness::Fresh),
            (Some(0), 0, Freshness::Expired),
            (None, 0, Freshness::Fresh),
            (None, 2880, Freshness::RefreshAhead), // an hour assumed
            (None, 3600, Freshness::Expired),
        ];
        for (lifetime, age, expected) in cases {
            assert_eq!(
                token(lifetime).freshness(start + secs(age)),
                expected,
                "{lifetime:?} at {age}"
            );
        }
    }

    #[test]
    fn auth_method_follows_the_metadata() {
        let list = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases = [
            (true, None, AuthMethod::Basic),
            (true, Some(list(&["client_secret_post"])), AuthMethod::Post),
            (
                true,
                Some(list(&["client_secret_post", "client_secret_basic"])),
                AuthMethod::Basic,
            ),
            (true, Some(list(&["private_key_jwt"])), AuthMethod::Basic),
            (false, None, AuthMethod::None),
        ];
        for (secret, supported, expected) in cases {
            assert_eq!(
                AuthMethod::choose(secret, supported.as_deref()),
                expected,
                "{supported:?}"
            );
        }
    }

    #[test]
    fn a_registration_is_renewed_a_minute_before_its_secret_expires() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // (client_secret_expires_at, renewed at `now`)
        let cases = [
            (None, false),
            (Some(0), false),
            (Some(1_800_000_000 + 3600), false),
            (Some(1_800_000_000 + 61), false),
            (Some(1_800_000_000 + 60), true),
            (Some(1_700_000_000), true),
        ];
        for (expires_at, renewed) in cases {
            let client = ClientAuth {
                id: "c".into(),
                secret: Some("s".into()),
                method: AuthMethod::Basic,
                secret_expires: secret_expiry(expires_at),
            };
            assert_eq!(client.expired(now), renewed, "{expires_at:?}");
        }
    }

    #[test]
    fn token_forms() {
        let client = |method| ClientAuth {
            id: "eragate:1".into(),
            secret: Some("s&cret".into()),
            method,
            secret_expires: None,
        };
        let r = "http://127.0.0.1:1/mcp";
        let cases = [
            (
                Grant::ClientCredentials,
                Some("a b"),
                client(AuthMethod::Basic),
                "grant_type=client_credentials&resource=http%3A%2F%2F127.0.0.1%3A1%2Fmcp&scope=a+b",
                Some("ZXJhZ2F0ZSUzQTE6cyUyNmNyZXQ="),
            ),
            (
                Grant::ClientCredentials,
                None,
                client(AuthMethod::Post),
                "grant_type=client_credentials&resource=http%3A%2F%2F127.0.0.1%3A1%2Fmcp&client_id=eragate%3A1&client_secret=s%26cret",
                None,
            ),
            (
                Grant::Exchange {
                    subject_token: "abc.def",
                    audience: Some("up"),
                },
                None,
                client(AuthMethod::Basic),
                "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&subject_token=abc.def&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token&requested_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token&audience=up&resource=http%3A%2F%2F127.0.0.1%3A1%2Fmcp",
                Some("ZXJhZ2F0ZSUzQTE6cyUyNmNyZXQ="),
            ),
        ];
        for (grant, scope, client, form, basic) in cases {
            let (got_form, got_basic) = token_form(grant, scope, r, &client);
            assert_eq!(got_form, form, "{form}");
            assert_eq!(got_basic.as_deref(), basic, "{form}");
        }
    }

    #[test]
    fn token_responses() {
        let now = Instant::now();
        let ok = read_token_response(br#"{"access_token":"t","token_type":"Bearer","expires_in":60}"#, now).unwrap();
        assert_eq!((ok.value.as_str(), ok.lifetime), ("t", Some(Duration::from_secs(60))));
        let cases: &[&[u8]] = &[
            br#"{"access_token":"t","token_type":"mac"}"#,
            br#"{"access_token":"","token_type":"bearer"}"#,
            br#"{"error":"invalid_client"}"#,
            b"<html>",
        ];
        for body in cases {
            assert!(
                read_token_response(body, now).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
