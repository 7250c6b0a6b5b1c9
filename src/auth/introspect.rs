//! Opaque access tokens, asked about at the authorization server's introspection
//! endpoint (RFC 7662) with eragate's own client credentials. An active answer must
//! name this resource in `aud` and, when it names an issuer, the configured one; its
//! principal is `iss` + `sub` (`client_id` for a client's own token). Answers are
//! cached, keyed by the token's digest: an active one until its `exp` (at most
//! `cache_max`), an inactive one for a minute; the cache is bounded.

use std::time::Duration;

use base64::Engine;
use dashmap::DashMap;
use serde::Deserialize;

use super::fetch::{FetchError, Fetcher};
use super::jwt::JwtError;

/// How long a "not active" answer is remembered.
const INACTIVE_FOR: u64 = 60;

/// What introspection said, once checked for this resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Introspected {
    /// An active token for this resource.
    Active {
        /// `sub`, else `client_id`.
        subject: String,
        /// `scope`, split.
        scopes: Vec<String>,
    },
    /// Not acceptable here.
    Refused(JwtError),
}

/// The introspection client and its cache.
pub(crate) struct Introspector {
    fetcher: Fetcher,
    /// `Basic` credentials (RFC 6749 §2.3.1: each part form-encoded).
    credentials: String,
    endpoint: Option<String>,
    cache: DashMap<([u8; 32], usize), (Introspected, u64)>,
    capacity: usize,
    cache_max: u64,
}

#[derive(Deserialize)]
struct Answer {
    active: bool,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    aud: Option<Audiences>,
    #[serde(default)]
    exp: Option<f64>,
    #[serde(default)]
    nbf: Option<f64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audiences {
    One(String),
    Many(Vec<String>),
}

impl Introspector {
    /// A client authenticating as `client_id` with `secret`, asking `endpoint` (else
    /// the one in the issuer's metadata), caching at most `capacity` answers.
    pub(crate) fn new(
        fetcher: Fetcher,
        client_id: &str,
        secret: &str,
        endpoint: Option<String>,
        capacity: usize,
        cache_max: Duration,
    ) -> Introspector {
        // RFC 6749 §2.3.1: each part form-urlencoded before Basic.
        let pair = format!("{}:{}", form_encode(client_id), form_encode(secret));
        Introspector {
            fetcher,
            credentials: base64::engine::general_purpose::STANDARD.encode(pair),
            endpoint,
            cache: DashMap::new(),
            capacity,
            cache_max: cache_max.as_secs(),
        }
    }

    /// The configured endpoint, else `discovered`.
    pub(crate) fn endpoint<'a>(&'a self, discovered: Option<&'a str>) -> Option<&'a str> {
        self.endpoint.as_deref().or(discovered)
    }

    /// What the authorization server at `endpoint` says of `token` (digest `digest`)
    /// for the resource `resource` (index `index`) of `issuer`, at `now`.
    pub(crate) async fn introspect(
        &self,
        endpoint: &str,
        token: &str,
        digest: [u8; 32],
        (index, resource): (usize, &str),
        issuer: &str,
        now: u64,
    ) -> Result<Introspected, FetchError> {
        if let Some(entry) = self.cache.get(&(digest, index))
            && now < entry.1
        {
            return Ok(entry.0.clone());
        }
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let fetched = self.fetcher.post_form(endpoint, &form, Some(&self.credentials)).await?;
        let answer: Answer =
            serde_json::from_slice(&fetched.body).map_err(|_| FetchError::Body(endpoint.to_owned()))?;
        tracing::debug!(active = answer.active, "introspected a token");
        let (outcome, until) = judge(answer, resource, issuer, now, self.cache_max);
        self.remember((digest, index), outcome.clone(), until, now);
        Ok(outcome)
    }

    fn remember(&self, key: ([u8; 32], usize), outcome: Introspected, until: u64, now: u64) {
        if self.capacity == 0 || until <= now {
            return;
        }
        if self.cache.len() >= self.capacity {
            self.cache.retain(|_, (_, until)| now < *until);
            if self.cache.len() >= self.capacity {
                self.cache.clear();
            }
        }
        self.cache.insert(key, (outcome, until));
    }
}

/// The verdict on an answer, and until when it may be reused.
fn judge(answer: Answer, resource: &str, issuer: &str, now: u64, cache_max: u64) -> (Introspected, u64) {
    let refused = |why| (Introspected::Refused(why), now + INACTIVE_FOR);
    let now_f = now as f64;
    if !answer.active || answer.exp.is_some_and(|exp| exp <= now_f) {
        return refused(JwtError::Inactive);
    }
    if answer.nbf.is_some_and(|nbf| nbf > now_f) {
        return refused(JwtError::NotYetValid);
    }
    if answer.iss.as_deref().is_some_and(|iss| iss != issuer) {
        return refused(JwtError::WrongIssuer);
    }
    let for_us = match &answer.aud {
        Some(Audiences::One(aud)) => aud == resource,
        Some(Audiences::Many(auds)) => auds.iter().any(|a| a == resource),
        None => false,
    };
    if !for_us {
        return refused(JwtError::WrongAudience);
    }
    let Some(subject) = answer.sub.or(answer.client_id).filter(|s| !s.is_empty()) else {
        return refused(JwtError::MissingClaim);
    };
    let scopes = answer
        .scope
        .unwrap_or_default()
        .split(' ')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let until = answer
        .exp
        .map_or(now + cache_max, |exp| (exp.max(0.0) as u64).min(now + cache_max));
    (Introspected::Active { subject, scopes }, until)
}

/// `text` as application/x-www-form-urlencoded.
fn form_encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(json: serde_json::Value) -> Answer {
        serde_json::from_value(json).expect("answer")
    }

    const R: &str = "https://mcp.example.com/mcp";
    const I: &str = "https://auth.example.com";

    #[test]
    fn verdicts() {
        let good = serde_json::json!({"active": true, "sub": "alice", "aud": R, "iss": I, "exp": 1100, "scope": "a b"});
        assert_eq!(
            judge(answer(good.clone()), R, I, 1000, 300),
            (
                Introspected::Active {
                    subject: "alice".into(),
                    scopes: vec!["a".into(), "b".into()]
                },
                1100
            )
        );
        assert_eq!(judge(answer(good), R, I, 1000, 30).1, 1030, "capped by cache_max");
        let cases = [
            (serde_json::json!({"active": false}), JwtError::Inactive),
            (
                serde_json::json!({"active": true, "sub": "a", "aud": R, "exp": 900}),
                JwtError::Inactive,
            ),
            (
                serde_json::json!({"active": true, "sub": "a", "aud": "https://other/mcp"}),
                JwtError::WrongAudience,
            ),
            (serde_json::json!({"active": true, "sub": "a"}), JwtError::WrongAudience),
            (
                serde_json::json!({"active": true, "sub": "a", "aud": [R], "iss": "https://evil"}),
                JwtError::WrongIssuer,
            ),
            (serde_json::json!({"active": true, "aud": [R]}), JwtError::MissingClaim),
        ];
        for (json, why) in cases {
            assert_eq!(
                judge(answer(json.clone()), R, I, 1000, 300).0,
                Introspected::Refused(why),
                "{json}"
            );
        }
    }
}
