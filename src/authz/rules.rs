//! The pure rules of the authorization server: PKCE S256 (RFC 7636), redirect-URI
//! matching (exact, with RFC 8252's any-port loopback), and which redirect URIs
//! each `application_type` may register (OpenID Dynamic Client Registration §2).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Whether `verifier` is a PKCE verifier (RFC 7636 §4.1: 43–128 unreserved characters)
/// whose S256 challenge is `challenge`.
pub(crate) fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    well_formed && bool::from(computed.as_bytes().ct_eq(challenge.as_bytes()))
}

/// Whether `challenge` is an S256 challenge (43 base64url characters).
pub(crate) fn is_challenge(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// Whether `asked` is one of `registered`: byte for byte, except that a registered
/// `http` loopback IP literal matches any port (RFC 8252 §7.3).
pub(crate) fn redirect_matches(registered: &[String], asked: &str) -> bool {
    registered.iter().any(|r| r == asked || loopback_equal(r, asked))
}

fn loopback_equal(registered: &str, asked: &str) -> bool {
    let (Ok(mut r), Ok(mut a)) = (url::Url::parse(registered), url::Url::parse(asked)) else {
        return false;
    };
    let loopback_ip = |u: &url::Url| {
        u.scheme() == "http"
            && match u.host() {
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                _ => false,
            }
    };
    if !loopback_ip(&r) || !loopback_ip(&a) {
        return false;
    }
    // Parsing normalises; compare what remains once both ports are gone.
    let _ = r.set_port(None);
    let _ = a.set_port(None);
    r == a && asked.starts_with("http://") && !asked.contains('#')
}

/// A client's kind (RFC 7591 `application_type`, from OpenID DCR): `web` (the default)
/// or `native`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ApplicationType {
    /// A browser or server application: `https` redirects to non-local hosts.
    Web,
    /// An application on the user's device: loopback `http` or a private-use scheme.
    Native,
}

impl ApplicationType {
    /// Parses `application_type` (absent: `web`).
    pub(crate) fn parse(value: Option<&str>) -> Result<ApplicationType, String> {
        match value {
            None | Some("web") => Ok(ApplicationType::Web),
            Some("native") => Ok(ApplicationType::Native),
            Some(other) => Err(format!("application_type {other:?} is neither \"web\" nor \"native\"")),
        }
    }

    /// Its name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ApplicationType::Web => "web",
            ApplicationType::Native => "native",
        }
    }

    /// Why `uri` may not be a redirect URI of this kind of client, if it may not.
    pub(crate) fn refuses(self, uri: &str) -> Option<String> {
        let Ok(url) = url::Url::parse(uri) else {
            return Some(format!("{uri:?} is not an absolute URI"));
        };
        if url.fragment().is_some() {
            return Some(format!("{uri:?} has a fragment"));
        }
        let local = match url.host() {
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        };
        match (self, url.scheme()) {
            (ApplicationType::Web, "https") if !local => None,
            (ApplicationType::Web, _) => Some(format!("{uri:?}: a web client redirects to https on a non-local host")),
            (ApplicationType::Native, "http") if local && url.host_str() != Some("localhost") => None,
            (ApplicationType::Native, "http") => Some(format!(
                "{uri:?}: a native client's http redirect is to a loopback IP literal (RFC 8252 §8.3)"
            )),
            (ApplicationType::Native, "https") => Some(format!(
                "{uri:?}: a native client uses a loopback or private-use scheme redirect"
            )),
            // A private-use scheme: a reverse domain name (RFC 8252 §7.1).
            (ApplicationType::Native, scheme) if scheme.contains('.') => None,
            (ApplicationType::Native, _) => Some(format!(
                "{uri:?}: a private-use scheme is a reverse domain name (RFC 8252 §7.1)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce() {
        // RFC 7636 Appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        let cases = [
            (verifier, challenge, true),
            (verifier, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cN", false),
            ("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK", challenge, false),
            ("short", challenge, false),
            ("", challenge, false),
        ];
        for (v, c, expected) in cases {
            assert_eq!(pkce_matches(v, c), expected, "{v} {c}");
        }
        assert!(is_challenge(challenge));
        assert!(!is_challenge("plain-verifier"));
    }

    #[test]
    fn redirects() {
        let registered = vec![
            "http://127.0.0.1/callback".to_owned(),
            "https://app.example.com/cb".to_owned(),
            "http://[::1]:9/cb".to_owned(),
        ];
        let cases = [
            ("http://127.0.0.1/callback", true),
            ("http://127.0.0.1:53123/callback", true),
            ("http://[::1]:4000/cb", true),
            ("https://app.example.com/cb", true),
            ("https://app.example.com/cb/", false),
            ("https://app.example.com:8443/cb", false),
            ("https://app.example.com/cb?x=1", false),
            ("http://127.0.0.1:5000/other", false),
            ("http://localhost:5000/callback", false),
            ("http://127.0.0.1:5000/callback#f", false),
            ("https://evil.example/cb", false),
        ];
        for (asked, expected) in cases {
            assert_eq!(redirect_matches(&registered, asked), expected, "{asked}");
        }
    }

    #[test]
    fn application_types() {
        use ApplicationType::*;
        let cases = [
            (Web, "https://app.example.com/cb", true),
            (Web, "http://app.example.com/cb", false),
            (Web, "https://localhost/cb", false),
            (Web, "http://127.0.0.1:3000/cb", false),
            (Native, "http://127.0.0.1:3000/cb", true),
            (Native, "http://[::1]/cb", true),
            (Native, "http://localhost:3000/cb", false),
            (Native, "com.example.app:/cb", true),
            (Native, "myapp:/cb", false),
            (Native, "https://app.example.com/cb", false),
        ];
        for (kind, uri, allowed) in cases {
            assert_eq!(kind.refuses(uri).is_none(), allowed, "{kind:?} {uri}");
        }
        assert!(ApplicationType::parse(Some("desktop")).is_err());
        assert_eq!(ApplicationType::parse(None), Ok(Web));
    }
}
