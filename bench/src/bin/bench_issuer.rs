//! A minimal OAuth issuer for eragate's benchmark of the authenticated path: it serves
//! RFC 8414 metadata and a JWKS of one Ed25519 key, and mints RFC 9068 access tokens
//! signed with it, so that `bench/run.sh` measures eragate's token validation without
//! a Node.js identity provider on the benchmark's cores.
//!
//! ```text
//! bench-issuer 127.0.0.1:PORT
//!   GET /.well-known/oauth-authorization-server   issuer = http://127.0.0.1:PORT
//!   GET /jwks                                     the public key
//!   GET /token?aud=URL&scope=S&sub=NAME           a JWT for the resource URL, valid 1 h
//! ```
//!
//! The key is a fixed benchmark key, never a secret: the tokens it signs are good only
//! for an eragate configured to trust this issuer on 127.0.0.1.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// The benchmark's Ed25519 signing key (PKCS#8 DER), and its public half as a JWK `x`.
const KEY_PKCS8: [u8; 48] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20, 0xd3, 0x46, 0xa7,
    0x03, 0x16, 0x62, 0xdf, 0x26, 0x8c, 0x8d, 0x26, 0x54, 0x3e, 0x29, 0x4d, 0x35, 0x0e, 0x95, 0x3a, 0x37, 0x87, 0x4e,
    0x63, 0xe0, 0xe3, 0x97, 0x7b, 0xd5, 0x22, 0x61, 0xfe, 0xff,
];
const PUBLIC_X: &str = "PArymw6z7j3cq8kIYWJlgNDc9Fghs3fxB5RRJ6GsX2w";
const KID: &str = "bench-ed25519";

fn main() {
    let Some(addr) = std::env::args().nth(1).and_then(|a| a.parse::<SocketAddr>().ok()) else {
        eprintln!("usage: bench-issuer 127.0.0.1:PORT");
        std::process::exit(2);
    };
    let key = EncodingKey::from_ed_der(&KEY_PKCS8);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("bench-issuer: runtime: {e}");
            std::process::exit(1);
        });
    runtime.block_on(serve(addr, key));
}

async fn serve(addr: SocketAddr, key: EncodingKey) {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap_or_else(|e| {
        eprintln!("bench-issuer: cannot listen on {addr}: {e}");
        std::process::exit(1);
    });
    let issuer: &'static str = Box::leak(format!("http://{addr}").into_boxed_str());
    let key: &'static EncodingKey = Box::leak(Box::new(key));
    eprintln!("bench-issuer: issuer {issuer}");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let service = service_fn(move |request| async move { Ok::<_, Infallible>(handle(issuer, key, &request)) });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

type Response = http::Response<Full<Bytes>>;

fn handle(issuer: &str, key: &EncodingKey, request: &http::Request<Incoming>) -> Response {
    match request.uri().path() {
        "/.well-known/oauth-authorization-server" => json_reply(&json!({
            "issuer": issuer,
            "jwks_uri": format!("{issuer}/jwks"),
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "response_types_supported": ["code"],
        })),
        "/jwks" => json_reply(&json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "x": PUBLIC_X, "kid": KID, "alg": "EdDSA", "use": "sig"}]})),
        "/token" => token(issuer, key, request.uri().query().unwrap_or_default()),
        _ => text(StatusCode::NOT_FOUND, "not found"),
    }
}

fn token(issuer: &str, key: &EncodingKey, query: &str) -> Response {
    let param = |name: &str| {
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    let Some(audience) = param("aud") else {
        return text(StatusCode::BAD_REQUEST, "aud= is required");
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let claims = json!({
        "iss": issuer,
        "sub": param("sub").unwrap_or_else(|| "bench".into()),
        "aud": audience,
        "scope": param("scope").unwrap_or_default(),
        "client_id": "mcpload",
        "iat": now,
        "exp": now + 3600,
        "jti": format!("bench-{now}"),
    });
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(KID.into());
    header.typ = Some("at+jwt".into());
    match jsonwebtoken::encode(&header, &claims, key) {
        Ok(jwt) => text(StatusCode::OK, &jwt),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &format!("signing failed: {e}")),
    }
}

fn json_reply(value: &Value) -> Response {
    let mut response = text(StatusCode::OK, &value.to_string());
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn text(status: StatusCode, body: &str) -> Response {
    let mut response = http::Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response
}
