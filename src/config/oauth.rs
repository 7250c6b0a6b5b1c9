//! Checks of `[auth.oauth]` and `listen.public_url` that types alone cannot make:
//! URLs an authorization server and clients can use, known algorithms, and
//! scope lists without typos.

use super::{ConfigIssue, ListenConfig, OAuthConfig};

/// The algorithms eragate can verify; `none` and the HMAC family are never among them
/// (an HMAC "key" would be the issuer's public key).
pub(crate) const KNOWN_ALGORITHMS: &[&str] = &["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"];

/// The problems of `[auth.oauth]` (and of the `listen.public_url` it names resources with).
// A flat list of independent checks, one per key (118 lines): split, they would only scatter.
pub(crate) fn oauth_issues(oauth: &OAuthConfig, listen: &ListenConfig) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut push = |path: String, message: String| issues.push(ConfigIssue { path, message });
    if let Err(why) = check_issuer(&oauth.issuer) {
        push("auth.oauth.issuer".into(), why);
    }
    if let Some(resource) = &oauth.resource
        && let Err(why) = check_resource(resource)
    {
        push("auth.oauth.resource".into(), why);
    }
    if let Some(public) = &listen.public_url
        && let Err(why) = check_public_url(public)
    {
        push("listen.public_url".into(), why);
    }
    if let Some(doc) = &oauth.resource_documentation
        && !matches!(
            url::Url::parse(doc).map(|u| u.scheme().to_owned()).as_deref(),
            Ok("https" | "http")
        )
    {
        push(
            "auth.oauth.resource_documentation".into(),
            "must be an absolute http(s) URL".into(),
        );
    }
    if let Some(introspection) = &oauth.introspection {
        let at = |key: &str| format!("auth.oauth.introspection.{key}");
        if introspection.client_id.is_empty() {
            push(at("client_id"), "must not be empty".into());
        }
        match (&introspection.client_secret, &introspection.client_secret_env) {
            (Some(_), Some(_)) | (None, None) => push(
                at("client_secret"),
                "give exactly one of `client_secret` or `client_secret_env`".into(),
            ),
            (None, Some(name)) if introspection.secret().is_none() => {
                push(
                    at("client_secret_env"),
                    format!("environment variable {name} is not set"),
                );
            }
            _ => {}
        }
        if let Some(endpoint) = &introspection.endpoint
            && let Err(why) = url::Url::parse(endpoint)
                .map_err(|e| format!("{endpoint:?} is not a URL ({e})"))
                .and_then(|u| check_web_url(&u))
        {
            push(at("endpoint"), why);
        }
    }
    if oauth.algorithms.is_empty() {
        push("auth.oauth.algorithms".into(), "name at least one algorithm".into());
    }
    for (i, alg) in oauth.algorithms.iter().enumerate() {
        if !KNOWN_ALGORITHMS.contains(&alg.as_str()) {
            push(
                format!("auth.oauth.algorithms[{i}]"),
                format!("{alg:?} is not accepted; use one of {}", KNOWN_ALGORITHMS.join(", ")),
            );
        }
    }
    for (list, scopes) in [
        ("scopes_supported", &oauth.scopes_supported),
        ("required_scopes", &oauth.required_scopes),
    ] {
        for (i, scope) in scopes.iter().enumerate() {
            if let Err(why) = check_scope(scope) {
                push(format!("auth.oauth.{list}[{i}]"), why);
            }
        }
    }
    for (key, scopes) in &oauth.scopes_for {
        let path = format!("auth.oauth.scopes_for.\"{key}\"");
        let method = key.split_once(':').map_or(key.as_str(), |(m, _)| m);
        if !method.contains('/') {
            push(
                path.clone(),
                "name a method (\"tools/call\") or a method and a name (\"tools/call:NAME\")".into(),
            );
        }
        if key.contains(':') && crate::protocol::method::named_param(method).is_none() {
            push(
                path.clone(),
                "only tools/call, prompts/get and resources/read take a name".into(),
            );
        }
        for (i, scope) in scopes.iter().enumerate() {
            if let Err(why) = check_scope(scope) {
                push(format!("{path}[{i}]"), why);
            } else if !oauth.scopes_supported.is_empty() && !oauth.scopes_supported.contains(scope) {
                let hint = closest(scope, &oauth.scopes_supported)
                    .map(|s| format!(" (did you mean {s:?}?)"))
                    .unwrap_or_default();
                push(
                    format!("{path}[{i}]"),
                    format!("{scope:?} is not in scopes_supported{hint}"),
                );
            }
        }
    }
    if !oauth.scopes_supported.is_empty() {
        for (i, scope) in oauth.required_scopes.iter().enumerate() {
            if !oauth.scopes_supported.contains(scope) {
                let hint = closest(scope, &oauth.scopes_supported)
                    .map(|s| format!(" (did you mean {s:?}?)"))
                    .unwrap_or_default();
                push(
                    format!("auth.oauth.required_scopes[{i}]"),
                    format!("{scope:?} is not in scopes_supported{hint}"),
                );
            }
        }
    }
    if let Some(ca) = &oauth.ca {
        issues.extend(super::tls::ca_issue(ca, "auth.oauth.ca"));
    }
    issues
}

/// An issuer identifier (RFC 8414 §2): an absolute `https` URL without query or
/// fragment; `http` only on a loopback host.
pub(crate) fn check_issuer(issuer: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(issuer).map_err(|e| format!("{issuer:?} is not a URL ({e})"))?;
    check_web_url(&url)?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err("an issuer has no query or fragment".into());
    }
    Ok(url)
}

fn check_resource(resource: &str) -> Result<(), String> {
    let url = url::Url::parse(resource).map_err(|e| format!("{resource:?} is not a URL ({e})"))?;
    check_web_url(&url)?;
    if url.fragment().is_some() {
        return Err("a resource URI has no fragment (RFC 8707)".into());
    }
    Ok(())
}

fn check_public_url(public: &str) -> Result<(), String> {
    let url = url::Url::parse(public).map_err(|e| format!("{public:?} is not a URL ({e})"))?;
    if !matches!(url.scheme(), "https" | "http") || url.host().is_none() {
        return Err("must be an absolute http(s) URL such as \"https://mcp.example.com\"".into());
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err("name only scheme, host and port; each upstream's path is appended".into());
    }
    Ok(())
}

/// `https`, or `http` toward a loopback host: tokens and keys never cross a network in clear.
fn check_web_url(url: &url::Url) -> Result<(), String> {
    match (url.scheme(), url.host()) {
        (_, None) => Err("must be an absolute URL with a host".into()),
        ("https", Some(_)) => Ok(()),
        ("http", Some(host)) if is_loopback(&host) => Ok(()),
        ("http", Some(_)) => Err("must be https:// (http:// only on a loopback host)".into()),
        _ => Err("must be an https:// URL".into()),
    }
}

fn is_loopback(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    }
}

/// A scope token (RFC 6749 §3.3), and never `offline_access`: refresh tokens are the
/// client's business with the authorization server, not a resource's (MCP 2026-07-28).
fn check_scope(scope: &str) -> Result<(), String> {
    if scope.is_empty() {
        return Err("a scope must not be empty".into());
    }
    if let Some(bad) = scope
        .chars()
        .find(|c| !matches!(*c, '\x21' | '\x23'..='\x5b' | '\x5d'..='\x7e'))
    {
        return Err(format!(
            "{scope:?} holds {bad:?}; a scope is printable ASCII without spaces, quotes or backslashes"
        ));
    }
    if scope == "offline_access" {
        return Err("offline_access is not a resource's scope; clients ask the authorization server for it".into());
    }
    Ok(())
}

/// The known scope closest to `typo` (edit distance at most 2).
fn closest<'a>(typo: &str, known: &'a [String]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (distance(typo, k), k.as_str()))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(oauth: &OAuthConfig) -> Vec<String> {
        oauth_issues(oauth, &ListenConfig::default())
            .into_iter()
            .map(|i| i.to_string())
            .collect()
    }

    #[test]
    fn issuers() {
        assert!(check_issuer("https://auth.example.com").is_ok());
        assert!(check_issuer("https://auth.example.com/tenant/a").is_ok());
        assert!(check_issuer("http://127.0.0.1:4444").is_ok());
        assert!(check_issuer("http://localhost:4444/").is_ok());
        for bad in [
            "auth.example.com",
            "http://auth.example.com",
            "https://a.example/?x=1",
            "ftp://a.example",
            "https://a.example/#f",
        ] {
            assert!(check_issuer(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_unreadable_ca_is_named() {
        let mut oauth = OAuthConfig::for_issuer("https://auth.example.com");
        oauth.ca = Some("/nonexistent/ca.pem".into());
        let found = issues(&oauth);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("auth.oauth.ca"), "{found:?}");
    }

    #[test]
    fn scope_typos_and_offline_access_are_reported() {
        let mut oauth = OAuthConfig::for_issuer("https://auth.example.com");
        oauth.scopes_supported = vec!["mcp:read".into(), "mcp:write".into(), "offline_access".into()];
        oauth.required_scopes = vec!["mcp:raed".into(), "with space".into()];
        let found = issues(&oauth);
        assert!(
            found.iter().any(|i| i.starts_with("auth.oauth.scopes_supported[2]")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|i| i.starts_with("auth.oauth.required_scopes[0]") && i.contains("\"mcp:read\"")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|i| i.starts_with("auth.oauth.required_scopes[1]")),
            "{found:?}"
        );
    }

    #[test]
    fn scope_rules_name_methods_and_known_scopes() {
        let mut oauth = OAuthConfig::for_issuer("https://auth.example.com");
        oauth.scopes_supported = vec!["mcp:tools".into(), "mcp:admin".into()];
        oauth.scopes_for = [
            ("tools/call:wipe", vec!["mcp:admn".to_owned()]),
            ("tools/list:x", vec!["mcp:tools".to_owned()]),
            ("wipe", vec!["mcp:admin".to_owned()]),
            ("tools/call", vec!["mcp:tools".to_owned()]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let found = issues(&oauth);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(
            found
                .iter()
                .any(|i| i.contains("\"tools/call:wipe\"[0]") && i.contains("\"mcp:admin\"")),
            "{found:?}"
        );
        assert!(found.iter().any(|i| i.contains("\"tools/list:x\"")), "{found:?}");
        assert!(found.iter().any(|i| i.contains("\"wipe\"")), "{found:?}");
    }

    #[test]
    fn algorithms_outside_the_allowlist_are_reported() {
        let mut oauth = OAuthConfig::for_issuer("https://auth.example.com");
        oauth.algorithms = vec!["ES256".into(), "HS256".into(), "none".into()];
        let found = issues(&oauth);
        assert_eq!(found.len(), 2, "{found:?}");
    }

    #[test]
    fn public_url_names_only_an_origin() {
        let listen = ListenConfig {
            public_url: Some("https://mcp.example.com/mcp".into()),
            ..ListenConfig::default()
        };
        let found = oauth_issues(&OAuthConfig::for_issuer("https://a.example"), &listen);
        assert_eq!(found[0].path, "listen.public_url");
    }
}
