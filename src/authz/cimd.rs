//! Client ID Metadata Documents: a `client_id` that is an `https` URL names a JSON
//! document describing the client, fetched from there. The fetch is guarded
//! against SSRF: `https` only, no userinfo, every address the host resolves to
//! must be public (no loopback, private, link-local … unless the host is in the
//! configured allowlist, for tests), and the connection goes to the address that
//! was checked (no second resolution to rebind). The answer is bounded in size and
//! time; `Cache-Control` decides how long it is kept; its `client_id` must equal
//! the URL exactly.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::store::{Client, ClientOrigin};

/// Largest document accepted.
const MAX_DOCUMENT: usize = 16 * 1024;
/// The whole fetch, resolution to last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Kept this long without cache headers, and the bounds on what they ask.
const DEFAULT_FRESH: Duration = Duration::from_secs(300);
const MAX_FRESH: Duration = Duration::from_secs(24 * 3600);
/// Most documents cached.
const MAX_CACHED: usize = 1000;

/// Fetches and caches client metadata documents.
pub(crate) struct Documents {
    tls: Arc<rustls::ClientConfig>,
    private_hosts: Vec<String>,
    cache: Mutex<HashMap<String, (Client, Instant)>>,
}

impl Documents {
    /// A fetcher trusting `ca` (else the public roots), letting `private_hosts` resolve
    /// to private or loopback addresses.
    pub(crate) fn new(ca: Option<&std::path::Path>, private_hosts: Vec<String>) -> Result<Documents, String> {
        let tls = crate::tls::ClientTls { ca, identity: None }
            .config()
            .map_err(|e| e.to_string())?;
        Ok(Documents {
            tls: Arc::new(tls),
            private_hosts,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The client `url` names (cached while fresh); `Err` says why it is refused.
    pub(crate) async fn client(&self, url: &str, now: u64) -> Result<Client, String> {
        if let Some((client, until)) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(url)
            && *until > Instant::now()
        {
            return Ok(client.clone());
        }
        let (body, max_age) = tokio::time::timeout(FETCH_TIMEOUT, self.fetch(url))
            .await
            .map_err(|_| format!("{url}: no answer within {FETCH_TIMEOUT:?}"))??;
        let client = parse(url, &body, now)?;
        let fresh = max_age.unwrap_or(DEFAULT_FRESH).min(MAX_FRESH);
        if !fresh.is_zero() {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= MAX_CACHED {
                let now = Instant::now();
                cache.retain(|_, (_, until)| *until > now);
            }
            if cache.len() < MAX_CACHED {
                cache.insert(url.to_owned(), (client.clone(), Instant::now() + fresh));
            }
        }
        Ok(client)
    }

    async fn fetch(&self, text: &str) -> Result<(Bytes, Option<Duration>), String> {
        let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL ({e})"))?;
        if url.scheme() != "https" || !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "{text}: a client metadata document is fetched only over https, without userinfo"
            ));
        }
        if url.fragment().is_some() || url.path() == "/" {
            return Err(format!("{text}: a client id URL has a path and no fragment"));
        }
        let host = url.host_str().ok_or_else(|| format!("{text}: no host"))?.to_owned();
        let port = url.port_or_known_default().unwrap_or(443);
        let address = self.resolve(&host, port).await?;
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| format!("{text}: {e}"))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        let name = rustls::pki_types::ServerName::try_from(bare).map_err(|e| format!("{text}: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("{text}: TLS: {e}"))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("{text}: {e}"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let path = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        let request = http::Request::get(path)
            .header(http::header::HOST, host_header(&url))
            .header(http::header::ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("{text}: {e}"))?;
        let response = sender.send_request(request).await.map_err(|e| format!("{text}: {e}"))?;
        if response.status() != http::StatusCode::OK {
            return Err(format!("{text}: HTTP {}", response.status()));
        }
        let max_age = max_age(response.headers());
        let body = Limited::new(response.into_body(), MAX_DOCUMENT)
            .collect()
            .await
            .map_err(|_| format!("{text}: unreadable, or larger than {MAX_DOCUMENT} bytes"))?
            .to_bytes();
        Ok((body, max_age))
    }

    /// The address to connect to: every one `host` resolves to must be public,
    /// unless the host is allowlisted.
    async fn resolve(&self, host: &str, port: u16) -> Result<SocketAddr, String> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| format!("{host}: {e}"))?
            .collect();
        let allowed = self.private_hosts.iter().any(|h| h.eq_ignore_ascii_case(bare));
        if !allowed && let Some(bad) = addresses.iter().find(|a| !is_public(a.ip())) {
            return Err(format!(
                "{host} resolves to {}, a private or loopback address: refused (SSRF guard)",
                bad.ip()
            ));
        }
        addresses.first().copied().ok_or_else(|| format!("{host}: no address"))
    }
}

/// The `Host` of a request to `url`: its host, and its port unless the scheme's
/// default (RFC 9110 §7.2).
fn host_header(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// Whether `ip` is a public unicast address.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || first == 0x2001 && v6.segments()[1] == 0x0db8)
        }
    }
}

/// `Cache-Control`'s `max-age` (zero for `no-store` / `no-cache`).
fn max_age(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get(http::header::CACHE_CONTROL)?.to_str().ok()?;
    let mut age = None;
    for directive in value.split(',').map(str::trim) {
        if directive.eq_ignore_ascii_case("no-store") || directive.eq_ignore_ascii_case("no-cache") {
            return Some(Duration::ZERO);
        }
        if let Some(seconds) = directive.strip_prefix("max-age=") {
            age = seconds.trim_matches('"').parse().ok().map(Duration::from_secs);
        }
    }
    age
}

/// The client a document at `url` describes.
fn parse(url: &str, body: &[u8], now: u64) -> Result<Client, String> {
    let document: Value = serde_json::from_slice(body).map_err(|e| format!("{url}: not JSON ({e})"))?;
    if document.get("client_id").and_then(Value::as_str) != Some(url) {
        return Err(format!("{url}: the document's client_id is not its URL"));
    }
    let redirect_uris: Vec<String> = document
        .get("redirect_uris")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    if redirect_uris.is_empty() {
        return Err(format!("{url}: the document lists no redirect_uris"));
    }
    match document.get("token_endpoint_auth_method").and_then(Value::as_str) {
        None | Some("none") => {}
        Some(other) => {
            return Err(format!(
                "{url}: token_endpoint_auth_method {other:?}: only public clients (none) are supported"
            ));
        }
    }
    if document.get("client_secret").is_some() {
        return Err(format!("{url}: a metadata document holds no client_secret"));
    }
    Ok(Client {
        client_id: url.to_owned(),
        secret_sha256: None,
        redirect_uris,
        client_name: document.get("client_name").and_then(Value::as_str).map(str::to_owned),
        origin: ClientOrigin::MetadataDocument,
        registered_at: now,
        metadata: Some(document),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_pass_the_guard() {
        let cases = [
            ("93.184.216.34", true),
            ("2606:4700::1111", true),
            ("127.0.0.1", false),
            ("10.1.2.3", false),
            ("172.16.0.1", false),
            ("192.168.1.1", false),
            ("169.254.169.254", false),
            ("100.64.0.1", false),
            ("0.0.0.0", false),
            ("::1", false),
            ("fd00::1", false),
            ("fe80::1", false),
            ("::ffff:127.0.0.1", false),
            ("::ffff:8.8.8.8", true),
        ];
        for (ip, public) in cases {
            assert_eq!(is_public(ip.parse().expect("ip")), public, "{ip}");
        }
    }

    #[test]
    fn documents() {
        let url = "https://app.example.com/client.json";
        let ok = format!(r#"{{"client_id": "{url}", "redirect_uris": ["http://127.0.0.1/cb"], "client_name": "App"}}"#);
        assert_eq!(
            parse(url, ok.as_bytes(), 1).map(|c| c.client_name),
            Ok(Some("App".into()))
        );
        let cases = [
            r#"{"client_id": "https://evil.example.com/client.json", "redirect_uris": ["http://127.0.0.1/cb"]}"#
                .to_owned(),
            format!(r#"{{"client_id": "{url}"}}"#),
            format!(
                r#"{{"client_id": "{url}", "redirect_uris": ["x:/"], "token_endpoint_auth_method": "client_secret_basic"}}"#
            ),
            "not json".to_owned(),
        ];
        for body in cases {
            assert!(parse(url, body.as_bytes(), 1).is_err(), "{body}");
        }
    }

    #[test]
    fn the_host_header_names_a_port_unless_it_is_the_default() {
        let cases = [
            ("https://localhost:18443/c.json", "localhost:18443"),
            ("https://app.example.com/c.json", "app.example.com"),
            ("https://app.example.com:443/c.json", "app.example.com"),
            ("https://[::1]:8443/c.json", "[::1]:8443"),
        ];
        for (url, host) in cases {
            assert_eq!(host_header(&url::Url::parse(url).expect("url")), host, "{url}");
        }
    }

    #[test]
    fn cache_headers() {
        let cases = [
            ("max-age=60", Some(60)),
            ("public, max-age=3600", Some(3600)),
            ("no-store", Some(0)),
            ("no-cache, max-age=60", Some(0)),
            ("private", None),
        ];
        for (value, expected) in cases {
            let mut headers = http::HeaderMap::new();
            headers.insert(http::header::CACHE_CONTROL, value.parse().expect("value"));
            assert_eq!(max_age(&headers).map(|d| d.as_secs()), expected, "{value}");
        }
    }
}
