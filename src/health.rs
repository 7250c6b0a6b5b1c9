//! `eragate health URL`: one plain-HTTP GET of a health endpoint, for a container's health
//! check where the image has no curl and no shell. A 2xx answer within the timeout is
//! healthy; anything else is one line saying why not.

use std::time::Duration;

/// GETs `url` (`http://host:port/path`) once, within `timeout` for the whole exchange.
/// Returns the status line's code and reason on a 2xx answer, else why it is not healthy.
pub async fn check(url: &str, timeout: Duration) -> Result<String, String> {
    match tokio::time::timeout(timeout, get(url)).await {
        Ok(result) => result,
        Err(_) => Err(format!("no answer within {}", humantime::format_duration(timeout))),
    }
}

async fn get(url: &str) -> Result<String, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err("only http:// URLs are checked (health endpoints are served in plain HTTP)".into());
    }
    let Some(authority) = uri.authority() else {
        return Err("the URL names no host".into());
    };
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let user_agent = concat!("eragate-health/", env!("CARGO_PKG_VERSION"));
    let (status, _) = crate::local_http::request(http::Method::GET, authority, path, None, user_agent).await?;
    let line = format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or(""));
    if status.is_success() {
        Ok(line.trim_end().to_owned())
    } else {
        Err(format!("answered {}", line.trim_end()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(url: &str) -> Result<String, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(check(url, Duration::from_secs(2)))
    }

    #[test]
    fn refuses_what_it_cannot_check() {
        assert!(run("https://127.0.0.1:1/healthz").unwrap_err().contains("only http://"));
        assert!(run("not a url at all").unwrap_err().contains("not a URL"));
    }

    #[test]
    fn a_closed_port_is_unhealthy() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let error = run(&format!("http://127.0.0.1:{port}/healthz")).unwrap_err();
        assert!(error.starts_with("cannot connect to 127.0.0.1:"), "{error}");
    }
}
