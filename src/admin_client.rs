//! `eragate pins …`: one plain-HTTP request to the admin listener's `/pins` endpoints,
//! with the admin token when one is given, answered with the status and the JSON body.

use std::time::Duration;

/// One `/pins` action: where it goes and what it carries.
pub struct PinsRequest<'a> {
    /// The admin listener's base URL, e.g. `http://127.0.0.1:9090`.
    pub admin: &'a str,
    /// `list`, `diff`, `approve` or `reset`.
    pub action: &'a str,
    /// The query's arguments (`upstream`, `name`, `digest`), those given.
    pub args: Vec<(&'a str, &'a str)>,
    /// The admin token (`ERAGATE_ADMIN_TOKEN`).
    pub token: Option<&'a str>,
}

/// Sends `request` within `timeout`: the answer's status code and body, or why there is none.
pub async fn pins(request: PinsRequest<'_>, timeout: Duration) -> Result<(u16, String), String> {
    match tokio::time::timeout(timeout, send(request)).await {
        Ok(result) => result,
        Err(_) => Err(format!("no answer within {}", humantime::format_duration(timeout))),
    }
}

async fn send(request: PinsRequest<'_>) -> Result<(u16, String), String> {
    let base: http::Uri = request
        .admin
        .parse()
        .map_err(|e| format!("--admin is not a URL: {e}"))?;
    if base.scheme_str() != Some("http") {
        return Err("--admin must be an http:// URL (the admin listener speaks plain HTTP)".into());
    }
    let Some(authority) = base.authority() else {
        return Err("--admin names no host".into());
    };
    let (method, path) = match request.action {
        "list" => (http::Method::GET, "/pins"),
        "diff" => (http::Method::GET, "/pins/diff"),
        "approve" => (http::Method::POST, "/pins/approve"),
        "reset" => (http::Method::POST, "/pins/reset"),
        other => return Err(format!("unknown action {other}")),
    };
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (key, value) in &request.args {
        query.append_pair(key, value);
    }
    let query = query.finish();
    let target = if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    };
    let user_agent = concat!("eragate-pins/", env!("CARGO_PKG_VERSION"));
    let (status, body) = crate::local_http::request(method, authority, &target, request.token, user_agent).await?;
    let status = status.as_u16();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}
