//! Finding the authorization server's metadata from its issuer identifier:
//! RFC 8414 first, then OpenID Connect Discovery, keeping the document whose
//! `issuer` is exactly the configured one (RFC 8414 §3.3).

use bytes::Bytes;
use serde::Deserialize;

use super::fetch::{FetchError, Fetcher};

/// What eragate needs from the authorization server's metadata.
#[derive(Clone, Debug)]
pub(crate) struct IssuerMetadata {
    /// Where the signing keys are.
    pub(crate) jwks_uri: String,
    /// RFC 7662 introspection, when the server offers it.
    pub(crate) introspection_endpoint: Option<String>,
    /// The document as fetched, served verbatim to 2025-03-26 clients at
    /// `/.well-known/oauth-authorization-server`.
    pub(crate) document: Bytes,
}

/// Why discovery failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// No well-known URL answered with a document.
    #[error("no metadata found for issuer {issuer}: {attempts}")]
    NotFound {
        /// The configured issuer.
        issuer: String,
        /// What each URL said.
        attempts: String,
    },
    /// A document whose `issuer` is another one (a misconfiguration, or an attack).
    #[error("metadata at {url} names issuer {found:?}, not {expected:?}")]
    IssuerMismatch {
        /// Where it came from.
        url: String,
        /// Its `issuer`.
        found: String,
        /// The configured one.
        expected: String,
    },
    /// A document without `jwks_uri`.
    #[error("metadata at {0} has no jwks_uri")]
    NoJwksUri(String),
}

/// The members eragate reads of a metadata document whose `issuer` was checked.
#[derive(Deserialize)]
struct Document {
    jwks_uri: Option<String>,
    introspection_endpoint: Option<String>,
}

/// The metadata URLs to try, in order: RFC 8414 (`/.well-known/…` inserted
/// before the issuer's path), OpenID Connect (`/.well-known/openid-configuration`
/// appended), and the RFC 8414 form of the OpenID document.
pub(crate) fn metadata_urls(issuer: &str) -> Vec<String> {
    let Ok(url) = url::Url::parse(issuer) else {
        return Vec::new();
    };
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
        format!("{origin}/.well-known/openid-configuration{path}"),
    ]
}

/// Fetches and checks the issuer's metadata.
pub(crate) async fn discover(fetcher: &Fetcher, issuer: &str) -> Result<IssuerMetadata, DiscoveryError> {
    let (url, body) = fetch_document(fetcher, issuer).await?;
    parse(&url, issuer, body)
}

/// The issuer's metadata document as fetched (RFC 8414 first, then OpenID), with
/// the URL it came from, once its `issuer` is found to be exactly `issuer`.
pub(crate) async fn fetch_document(fetcher: &Fetcher, issuer: &str) -> Result<(String, Bytes), DiscoveryError> {
    let mut attempts = Vec::new();
    let mut urls = metadata_urls(issuer);
    urls.dedup();
    for url in urls {
        match fetcher.get(&url).await {
            Ok(fetched) => {
                check_named_issuer(&url, issuer, &fetched.body)?;
                return Ok((url, fetched.body));
            }
            Err(error @ (FetchError::Status { .. } | FetchError::Body(_))) => attempts.push(error.to_string()),
            // The server cannot be reached at all: the other URLs would fail the same way.
            Err(error) => {
                attempts.push(error.to_string());
                break;
            }
        }
    }
    Err(DiscoveryError::NotFound {
        issuer: issuer.to_owned(),
        attempts: attempts.join("; "),
    })
}

/// RFC 8414 §3.3: the document's `issuer` is exactly the one asked for.
fn check_named_issuer(url: &str, issuer: &str, body: &[u8]) -> Result<(), DiscoveryError> {
    #[derive(Deserialize)]
    struct Named {
        issuer: String,
    }
    let named: Named = serde_json::from_slice(body).map_err(|e| DiscoveryError::NotFound {
        issuer: issuer.to_owned(),
        attempts: format!("{url}: not a metadata document ({e})"),
    })?;
    if named.issuer != issuer {
        return Err(DiscoveryError::IssuerMismatch {
            url: url.to_owned(),
            found: named.issuer,
            expected: issuer.to_owned(),
        });
    }
    Ok(())
}

fn parse(url: &str, issuer: &str, body: Bytes) -> Result<IssuerMetadata, DiscoveryError> {
    check_named_issuer(url, issuer, &body)?;
    let document: Document = serde_json::from_slice(&body).map_err(|e| DiscoveryError::NotFound {
        issuer: issuer.to_owned(),
        attempts: format!("{url}: not a metadata document ({e})"),
    })?;
    let jwks_uri = document
        .jwks_uri
        .ok_or_else(|| DiscoveryError::NoJwksUri(url.to_owned()))?;
    Ok(IssuerMetadata {
        jwks_uri,
        introspection_endpoint: document.introspection_endpoint,
        document: body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_urls_follow_rfc_8414_then_openid() {
        assert_eq!(
            metadata_urls("https://auth.example.com"),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_urls("https://auth.example.com/tenant/1/"),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant/1",
                "https://auth.example.com/tenant/1/.well-known/openid-configuration",
                "https://auth.example.com/.well-known/openid-configuration/tenant/1",
            ]
        );
    }

    #[test]
    fn the_issuer_must_match_exactly() {
        let body = Bytes::from_static(br#"{"issuer":"https://evil.example","jwks_uri":"https://evil.example/jwks"}"#);
        let error = parse("u", "https://auth.example.com", body).unwrap_err();
        assert!(matches!(error, DiscoveryError::IssuerMismatch { .. }));
        let body = Bytes::from_static(br#"{"issuer":"https://auth.example.com"}"#);
        assert_eq!(
            parse("u", "https://auth.example.com", body).unwrap_err(),
            DiscoveryError::NoJwksUri("u".into())
        );
    }
}
