//! Brokered login (`login = "oidc"`): users sign in at an upstream OpenID
//! provider, of which eragate is a confidential client. `/oauth/authorize`
//! sends the browser there (authorization code with PKCE S256, `state` and
//! `nonce` kept in the pending transaction); `/oauth/callback` takes the code
//! back, redeems it with the client secret and validates the ID token (its
//! signature by the provider's JWKS, `iss`, `aud`, `azp`, `exp`, `nonce`); the
//! configured claim (`sub` by default) becomes the principal, who then sees the
//! consent page (required: eragate's client at the provider is one client for
//! every MCP client, so each MCP client needs the user's own consent).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::Value;
use sha2::Digest;
use subtle::ConstantTimeEq;

use crate::auth::fetch::Fetcher;
use crate::auth::jwt::{self, Audience};
use crate::auth::keys::KeyStore;
use crate::config::OidcLogin;

/// How long a request to the provider may take.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
/// The least time between two JWKS refetches for an unknown key id.
const MIN_REFETCH: Duration = Duration::from_secs(10);
/// Clock skew allowed on the ID token's `exp`.
const LEEWAY: u64 = 60;

/// What one brokered sign-in keeps between the redirect and the callback.
#[derive(Clone, Debug)]
pub(crate) struct Upstream {
    /// The `state` sent to the provider.
    pub(crate) state: String,
    /// The `nonce` the ID token must carry.
    pub(crate) nonce: String,
    /// eragate's own PKCE verifier toward the provider.
    pub(crate) verifier: String,
}

/// The provider and eragate's client there.
pub(crate) struct Broker {
    issuer: String,
    client_id: String,
    secret: String,
    scopes: Vec<String>,
    subject_claim: String,
    algorithms: Vec<jsonwebtoken::Algorithm>,
    fetcher: Fetcher,
    /// The provider's metadata and keys.
    keys: Arc<KeyStore>,
    /// `ORIGIN/oauth/callback`.
    redirect_uri: String,
}

/// Why a brokered sign-in failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BrokerError {
    /// The provider cannot be reached, or answered nonsense.
    #[error("the identity provider is unavailable: {0}")]
    Unavailable(String),
    /// The provider refused, or its answer failed a check.
    #[error("the identity provider's answer was refused: {0}")]
    Refused(String),
}

/// The provider's endpoints, from its metadata.
struct Endpoints {
    authorization: String,
    token: String,
    /// Whether it says it sends `iss` in its authorization responses (RFC 9207).
    iss_parameter: bool,
}

impl Broker {
    /// The broker of `[auth.server.oidc]`, for an authorization server at `origin`.
    pub(crate) fn new(config: &OidcLogin, origin: &str) -> Result<Broker, String> {
        let secret = config
            .secret()
            .ok_or("[auth.server.oidc] has no client secret (client_secret, or client_secret_env set)")?;
        let fetcher = Fetcher::new(PROVIDER_TIMEOUT, config.ca.as_deref()).map_err(|e| e.to_string())?;
        let algorithms = jwt::algorithms(&config.algorithms);
        let keys = KeyStore::new(fetcher.clone(), &config.issuer, algorithms.clone(), MIN_REFETCH);
        Ok(Broker::with_keys(config, secret, fetcher, keys, origin))
    }

    fn with_keys(config: &OidcLogin, secret: String, fetcher: Fetcher, keys: KeyStore, origin: &str) -> Broker {
        let algorithms = jwt::algorithms(&config.algorithms);
        Broker {
            issuer: config.issuer.clone(),
            client_id: config.client_id.clone(),
            secret,
            scopes: config.scopes.clone(),
            subject_claim: config.subject_claim.clone(),
            algorithms,
            fetcher,
            keys: Arc::new(keys),
            redirect_uri: format!("{origin}{}callback", crate::config::AUTH_SERVER_PREFIX),
        }
    }

    /// Loads the provider's metadata and keys in the background, and keeps them fresh.
    pub(crate) fn start(&self) {
        self.keys.spawn_loader();
    }

    async fn endpoints(&self) -> Result<Endpoints, BrokerError> {
        let loaded = self
            .keys
            .current()
            .await
            .ok_or_else(|| BrokerError::Unavailable(format!("no metadata from {} yet", self.issuer)))?;
        let document: Value = serde_json::from_slice(&loaded.metadata.document)
            .map_err(|e| BrokerError::Unavailable(format!("its metadata: {e}")))?;
        let endpoint = |name: &str| {
            document[name]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| BrokerError::Unavailable(format!("its metadata has no {name}")))
        };
        Ok(Endpoints {
            authorization: endpoint("authorization_endpoint")?,
            token: endpoint("token_endpoint")?,
            iss_parameter: document["authorization_response_iss_parameter_supported"] == Value::Bool(true),
        })
    }

    /// Where to send the browser, and what to keep for the callback.
    pub(crate) async fn redirect(&self) -> Result<(String, Upstream), BrokerError> {
        let endpoints = self.endpoints().await?;
        let upstream = Upstream {
            state: super::signing::random_token(),
            nonce: super::signing::random_token(),
            verifier: super::signing::random_token(),
        };
        let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(upstream.verifier.as_bytes()));
        let mut scope = vec!["openid".to_owned()];
        scope.extend(self.scopes.iter().filter(|s| *s != "openid").cloned());
        let mut url = url::Url::parse(&endpoints.authorization)
            .map_err(|e| BrokerError::Unavailable(format!("its authorization_endpoint: {e}")))?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.client_id)
            .append_pair("redirect_uri", &self.redirect_uri)
            .append_pair("scope", &scope.join(" "))
            .append_pair("state", &upstream.state)
            .append_pair("nonce", &upstream.nonce)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        Ok((url.to_string(), upstream))
    }

    /// The principal of a callback whose `state` already matched `upstream`:
    /// redeems `code` and validates the ID token.
    pub(crate) async fn principal(
        &self,
        code: &str,
        iss: Option<&str>,
        upstream: &Upstream,
    ) -> Result<String, BrokerError> {
        let endpoints = self.endpoints().await?;
        match iss {
            Some(iss) if iss != self.issuer => {
                return Err(BrokerError::Refused(format!(
                    "iss {iss:?} is not {:?} (RFC 9207)",
                    self.issuer
                )));
            }
            None if endpoints.iss_parameter => {
                return Err(BrokerError::Refused(
                    "the authorization response has no iss (RFC 9207)".into(),
                ));
            }
            _ => {}
        }
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", &self.redirect_uri)
            .append_pair("code_verifier", &upstream.verifier)
            .finish();
        // RFC 6749 §2.3.1: the id and secret are form-encoded before Basic.
        let encode = |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
        let basic = STANDARD.encode(format!("{}:{}", encode(&self.client_id), encode(&self.secret)));
        let answer = self
            .fetcher
            .post_form(&endpoints.token, &form, Some(&basic))
            .await
            .map_err(|e| BrokerError::Refused(format!("redeeming the code: {e}")))?;
        let answer: Value = serde_json::from_slice(&answer.body)
            .map_err(|e| BrokerError::Refused(format!("the token response: {e}")))?;
        let id_token = answer["id_token"]
            .as_str()
            .ok_or_else(|| BrokerError::Refused("the token response has no id_token".into()))?;
        self.validate(id_token, &upstream.nonce).await
    }

    /// Checks an ID token and returns its subject claim.
    async fn validate(&self, id_token: &str, nonce: &str) -> Result<String, BrokerError> {
        let refused = |what: String| BrokerError::Refused(what);
        let header = jwt::header(id_token, &self.algorithms).map_err(|e| refused(format!("the ID token: {e}")))?;
        let loaded = self
            .keys
            .current()
            .await
            .ok_or_else(|| BrokerError::Unavailable("no provider keys".into()))?;
        let mut keys = loaded.keys.clone();
        if !keys.knows(&header)
            && let Some(fresh) = self.keys.refetch(&keys).await
        {
            keys = fresh;
        }
        let audience = Audience::new(&self.issuer, &self.client_id, LEEWAY).accepting_any_typ();
        jwt::verify(id_token, &header, &keys, &audience, super::unix_now())
            .map_err(|e| refused(format!("the ID token: {e}")))?;
        let claims = payload(id_token).ok_or_else(|| refused("the ID token's claims are not JSON".into()))?;
        let found_nonce = claims["nonce"].as_str().unwrap_or_default();
        if !bool::from(found_nonce.as_bytes().ct_eq(nonce.as_bytes())) {
            return Err(refused("the ID token's nonce is not the one sent".into()));
        }
        // OpenID Connect Core §3.1.3.7: with several audiences, azp must be this client.
        let several = claims["aud"].as_array().is_some_and(|a| a.len() > 1);
        if (several || claims.get("azp").is_some()) && claims["azp"].as_str() != Some(&self.client_id) {
            return Err(refused("the ID token's azp is not this client".into()));
        }
        match &claims[self.subject_claim.as_str()] {
            Value::String(subject) if !subject.is_empty() && !subject.contains('#') => Ok(subject.clone()),
            _ => Err(refused(format!(
                "the ID token has no usable {} claim",
                self.subject_claim
            ))),
        }
    }
}

/// The claims of a JWT (its signature already verified).
fn payload(token: &str) -> Option<Value> {
    let middle = token.split('.').nth(1)?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(middle).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::signing;
    use jsonwebtoken::{Algorithm, Header};
    use serde_json::json;

    const ISSUER: &str = "https://id.example.com";

    fn config(subject_claim: &str) -> OidcLogin {
        OidcLogin {
            issuer: ISSUER.into(),
            client_id: "eragate".into(),
            client_secret: Some("s".into()),
            client_secret_env: None,
            scopes: vec![],
            subject_claim: subject_claim.into(),
            algorithms: vec!["EdDSA".into()],
            ca: None,
        }
    }

    /// A broker whose provider's keys are `published` (nothing is fetched).
    fn broker(published: &crate::authz::store::StoredKey, subject_claim: &str) -> Broker {
        let fetcher = Fetcher::new(Duration::from_secs(1), None).expect("fetcher");
        let keys = KeyStore::local(fetcher.clone(), ISSUER, vec![Algorithm::EdDSA]);
        let document = bytes::Bytes::from(json!({"issuer": ISSUER}).to_string());
        keys.publish(
            document,
            &format!("{ISSUER}/jwks"),
            &signing::jwks(std::slice::from_ref(published)),
        )
        .expect("publish");
        Broker::with_keys(&config(subject_claim), "s".into(), fetcher, keys, "http://127.0.0.1:1")
    }

    fn token(key: &crate::authz::store::StoredKey, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(key.kid.clone());
        jsonwebtoken::encode(&header, claims, &signing::encoding_key(key)).expect("sign")
    }

    #[test]
    fn id_tokens_are_checked_claim_by_claim() {
        let key = signing::generate(0);
        let mut impostor = signing::generate(0);
        impostor.kid = key.kid.clone();
        let now = super::super::unix_now();
        let good = json!({"iss": ISSUER, "aud": "eragate", "sub": "bob", "exp": now + 300,
            "iat": now, "nonce": "n-1", "email": "bob@example.com"});
        let with = |field: &str, value: Value| {
            let mut claims = good.clone();
            claims[field] = value;
            claims
        };
        let without = |field: &str| {
            let mut claims = good.clone();
            claims.as_object_mut().expect("object").remove(field);
            claims
        };
        // (signing key, claims, subject claim, the principal or None for a refusal)
        let cases: Vec<(&crate::authz::store::StoredKey, Value, &str, Option<&str>)> = vec![
            (&key, good.clone(), "sub", Some("bob")),
            (&key, good.clone(), "email", Some("bob@example.com")),
            (&key, with("nonce", json!("n-2")), "sub", None),
            (&key, without("nonce"), "sub", None),
            (&key, with("aud", json!("someone-else")), "sub", None),
            (&key, with("iss", json!("https://evil.example.com")), "sub", None),
            (&key, with("exp", json!(now - 3600)), "sub", None),
            (&key, without("sub"), "sub", None),
            (&key, good.clone(), "name", None),
            (&key, with("sub", json!("bob#admin")), "sub", None),
            (&impostor, good.clone(), "sub", None),
            (&key, with("aud", json!(["eragate", "other"])), "sub", None),
            (&key, with("azp", json!("other")), "sub", None),
            (
                &key,
                {
                    let mut claims = with("aud", json!(["eragate", "other"]));
                    claims["azp"] = json!("eragate");
                    claims
                },
                "sub",
                Some("bob"),
            ),
        ];
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        for (signer, claims, subject_claim, expected) in cases {
            let broker = broker(&key, subject_claim);
            let found = runtime.block_on(broker.validate(&token(signer, &claims), "n-1"));
            assert_eq!(found.as_deref().ok(), expected, "{claims} ({subject_claim}): {found:?}");
        }
    }
}
