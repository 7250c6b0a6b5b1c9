//! Which `Origin`s and `Host`s this listener serves: the browser checks in
//! front of every MCP endpoint, and handed to the built-in authorization server
//! ([`crate::authz::BrowserChecks`]), which applies them per endpoint.
//!
//! A present `Origin` must be the listener's own or a configured one (403
//! otherwise, as the spec asks). Without `Origin`, the `Host` (`:authority` on
//! h2) must name this listener (421 otherwise): a page that rebinds its own DNS
//! name to 127.0.0.1 still sends that name, so a loopback gateway does not
//! answer it. An IP literal is always served (rebinding needs a name); so are
//! `public_url`'s host, `localhost` on a loopback or wildcard bind, and
//! `listen.allowed_hosts`. The admin listener ([`crate::admin`]) applies the
//! same checks to its own address ([`Served::refusal`]).

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};

use http::header::{HOST, ORIGIN};
use http::{HeaderMap, HeaderValue, Uri};

use super::head::Repeated;

use crate::config::ListenConfig;
use crate::protocol::errors::Rejection;

/// The origins and host names one listener answers.
pub(crate) struct Served {
    /// Origins a browser may send: the listener's own and the configured ones.
    origins: Vec<String>,
    /// Host names (lower case, no port); `None` serves every host.
    hosts: Option<Vec<String>>,
}

impl Served {
    /// What a listener bound to `local` with `listen` serves.
    pub(crate) fn new(local: SocketAddr, listen: &ListenConfig) -> Served {
        let scheme = if listen.tls.is_some() { "https" } else { "http" };
        let mut origins = own_origins(scheme, local);
        origins.extend(listen.allowed_origins.iter().cloned());
        let every_host = listen.allowed_hosts.iter().any(|h| h == "*");
        let mut hosts: Vec<String> = listen
            .allowed_hosts
            .iter()
            .map(|h| normalized(h).into_owned())
            .collect();
        if local.ip().is_loopback() || local.ip().is_unspecified() {
            hosts.push("localhost".into());
        }
        // Served as every IP literal is, but found by the list before an address parse,
        // since it is the `Host` most clients of a bound address send.
        if !local.ip().is_unspecified() {
            hosts.push(local.ip().to_canonical().to_string());
        }
        let public = listen.public_url.as_deref().and_then(|u| u.parse::<Uri>().ok());
        if let Some(host) = public.as_ref().and_then(Uri::host) {
            hosts.push(normalized(host).into_owned());
        }
        Served {
            origins,
            hosts: (!every_host).then_some(hosts),
        }
    }

    /// The checks of a request the authorization server answers.
    pub(super) fn checks(&self, headers: &HeaderMap, uri: &Uri) -> crate::authz::BrowserChecks {
        let origin = origin_of(headers);
        crate::authz::BrowserChecks {
            origin_allowed: self.origin_allowed(origin),
            host_allowed: self.host_allowed(origin, headers.get(HOST), uri),
        }
    }

    /// Why a request with `headers` for `uri` fails the browser checks (403 for
    /// its `Origin`, 421 for its `Host`), or `None` when it passes both. For a
    /// listener that does not read its heads in one pass ([`crate::admin`]).
    pub(crate) fn refusal(&self, headers: &HeaderMap, uri: &Uri) -> Option<Rejection> {
        let origin = origin_of(headers);
        if !self.origin_allowed(origin) {
            return Some(Rejection::OriginNotAllowed);
        }
        if !self.host_allowed(origin, headers.get(HOST), uri) {
            return Some(Rejection::HostNotAllowed);
        }
        None
    }

    /// Whether a request carries no `Origin`, or exactly one this listener allows.
    pub(super) fn origin_allowed(&self, origin: Repeated<'_>) -> bool {
        match origin {
            Repeated::Absent => true,
            Repeated::One(origin) => origin.to_str().is_ok_and(|o| {
                self.origins
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(o.trim_end_matches('/')))
            }),
            Repeated::Several => false,
        }
    }

    /// Whether a request without `Origin` names a host this listener serves, by
    /// its `Host` (its first) or else its URI's authority; a request with `Origin`
    /// is judged by it instead.
    pub(super) fn host_allowed(&self, origin: Repeated<'_>, host: Option<&HeaderValue>, uri: &Uri) -> bool {
        let Some(hosts) = &self.hosts else { return true };
        if origin != Repeated::Absent {
            return true;
        }
        let authority = match host {
            Some(value) => match value.to_str() {
                Ok(text) => text,
                Err(_) => return false,
            },
            // HTTP/1.0 without Host, or h2 without `:authority`: no browser sends that.
            None => match uri.authority() {
                Some(authority) => authority.as_str(),
                None => return true,
            },
        };
        let Some(name) = host_name(authority) else { return false };
        hosts.iter().any(|host| *host == name) || name.parse::<IpAddr>().is_ok()
    }
}

/// The origins a page served by this listener itself (over `scheme`) would send.
fn own_origins(scheme: &str, local: SocketAddr) -> Vec<String> {
    let port = local.port();
    let ip = local.ip();
    if ip.is_loopback() || ip.is_unspecified() {
        vec![
            format!("{scheme}://localhost:{port}"),
            format!("{scheme}://127.0.0.1:{port}"),
            format!("{scheme}://[::1]:{port}"),
        ]
    } else {
        vec![format!("{scheme}://{local}")]
    }
}

/// The host name of a `Host` value, lower case, without port, brackets or a trailing dot.
fn host_name(authority: &str) -> Option<Cow<'_, str>> {
    let authority = authority.trim();
    let name = match authority.strip_prefix('[') {
        Some(rest) => rest.split_once(']')?.0,
        None => authority.rsplit_once(':').map_or(authority, |(name, _)| name),
    };
    (!name.is_empty()).then(|| normalized(name))
}

/// Borrowed when already lower case (a request's `Host` is checked without a copy).
fn normalized(host: &str) -> Cow<'_, str> {
    let host = host.trim().trim_end_matches('.');
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    }
}

/// The request's `Origin` header: absent, one, or several (which no check accepts).
fn origin_of(headers: &HeaderMap) -> Repeated<'_> {
    let mut origins = headers.get_all(ORIGIN).iter();
    match (origins.next(), origins.next()) {
        (None, _) => Repeated::Absent,
        (Some(one), None) => Repeated::One(one),
        (Some(_), Some(_)) => Repeated::Several,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn served(bind: &str, public_url: Option<&str>, allowed: &[&str]) -> Served {
        let listen = ListenConfig {
            public_url: public_url.map(str::to_owned),
            allowed_hosts: allowed.iter().map(|h| (*h).to_owned()).collect(),
            ..ListenConfig::default()
        };
        Served::new(bind.parse().unwrap(), &listen)
    }

    /// Whether `served` serves a request without `Origin` whose `Host` is `value`.
    fn serves_host(served: &Served, value: &str) -> bool {
        let host = HeaderValue::from_str(value).expect("a header value");
        served.host_allowed(Repeated::Absent, Some(&host), &Uri::from_static("/mcp"))
    }

    #[test]
    fn own_origins_for_loopback_and_public_binds() {
        // (scheme, bind, an origin served, an origin refused)
        let cases = [
            (
                "http",
                "127.0.0.1:8080",
                "http://localhost:8080",
                "https://localhost:8080",
            ),
            ("http", "10.0.0.5:9000", "http://10.0.0.5:9000", "https://10.0.0.5:9000"),
            (
                "https",
                "127.0.0.1:8443",
                "https://localhost:8443",
                "http://localhost:8443",
            ),
            ("https", "10.0.0.5:443", "https://10.0.0.5:443", "http://10.0.0.5:443"),
        ];
        for (scheme, bind, served, refused) in cases {
            let origins = own_origins(scheme, bind.parse().unwrap());
            assert!(origins.contains(&served.to_owned()), "{scheme} {bind}: {origins:?}");
            assert!(!origins.contains(&refused.to_owned()), "{scheme} {bind}: {origins:?}");
        }
    }

    #[test]
    fn hosts_a_listener_serves() {
        let uri = Uri::from_static("/mcp");
        let local = served("127.0.0.1:8080", Some("https://MCP.example.com"), &["gw.internal"]);
        let evil = HeaderValue::from_static("evil.example");
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST.",
            "[::1]:8080",
            "mcp.example.com",
            "gw.internal:443",
            "10.1.2.3",
        ] {
            assert!(serves_host(&local, ok), "{ok}");
        }
        for refused in ["evil.example:8080", "localhost.evil.example", "", ":8080"] {
            assert!(!serves_host(&local, refused), "{refused}");
        }
        // An Origin is judged by the origin check; no Host at all is no browser.
        let origin = HeaderValue::from_static("http://evil.example");
        assert!(local.host_allowed(Repeated::One(&origin), Some(&evil), &uri));
        assert!(local.host_allowed(Repeated::Several, Some(&evil), &uri));
        assert!(local.host_allowed(Repeated::Absent, None, &uri));
        assert!(!local.host_allowed(Repeated::Absent, None, &Uri::from_static("http://evil.example/mcp")));
        // A specific bind is not `localhost`; `*` serves every host.
        assert!(!serves_host(&served("10.0.0.5:80", None, &[]), "localhost"));
        assert!(serves_host(&served("10.0.0.5:80", None, &["*"]), "evil.example"));
    }
}
