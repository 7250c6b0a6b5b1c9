//! Test certificates made in the test with rcgen (a CA, and the server and
//! client certificates it signs), and TLS clients that show what a handshake
//! negotiated: the certificate presented, the ALPN protocol, the HTTP version.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// A certificate authority for one test.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate signed by a [`TestCa`], with its key, as PEM.
pub struct Issued {
    pub cert: String,
    pub key: String,
    /// The certificate's DER, to compare with what a server presents.
    pub der: Vec<u8>,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("CA key");
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA certificate"),
        }
    }

    /// The CA certificate (what a client trusts).
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `names` (DNS names or IP literals), named `common_name`.
    pub fn issue(&self, common_name: &str, names: &[&str]) -> Issued {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, common_name);
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf certificate");
        Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }

    /// A server certificate for `localhost` and `127.0.0.1`.
    pub fn localhost(&self, common_name: &str) -> Issued {
        self.issue(common_name, &["localhost", "127.0.0.1"])
    }
}

/// Writes `text` to `dir/name` through a temporary file and a rename, so a
/// reader never sees half a file; returns the path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    let partial = dir.join(format!(".{name}.partial"));
    std::fs::write(&partial, text).expect("write PEM");
    std::fs::rename(&partial, &path).expect("rename PEM");
    path
}

/// A client configuration trusting only `ca_pem`, offering `alpn`.
pub fn client_config(ca_pem: &str, alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A blocking TLS connection to `addr` as `localhost`, handshake done.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// Connects and completes the handshake; `Err` names why it failed.
pub fn connect(addr: SocketAddr, ca_pem: &str, alpn: &[&[u8]]) -> Result<TlsStream, String> {
    let name = ServerName::try_from("localhost").expect("server name");
    let mut connection = ClientConnection::new(client_config(ca_pem, alpn), name).map_err(|e| e.to_string())?;
    let mut tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    while connection.is_handshaking() {
        connection.complete_io(&mut tcp).map_err(|e| e.to_string())?;
    }
    Ok(StreamOwned::new(connection, tcp))
}

/// The leaf certificate the server presented.
pub fn presented(stream: &TlsStream) -> Vec<u8> {
    stream
        .conn
        .peer_certificates()
        .and_then(|certs| certs.first())
        .map(|c| c.to_vec())
        .unwrap_or_default()
}

/// Sends a GET for an event stream and reads its head; returns the status and
/// the stream, positioned at the start of the body, for [`next_event`].
pub fn open_event_stream(mut stream: TlsStream, path: &str) -> (u16, BufReader<TlsStream>) {
    let request = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\naccept: text/event-stream\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("write request");
    stream.flush().expect("flush");
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).expect("status line");
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).expect("header line") == 0 || line.trim_end().is_empty() {
            break;
        }
    }
    (code, reader)
}

/// The next SSE event's (`event`, `data`) on a chunked event stream, skipping
/// comments (keep-alives) and chunk-size lines (hex digits alone on a line).
pub fn next_event(reader: &mut BufReader<TlsStream>) -> Option<(String, String)> {
    let (mut event, mut data) = (String::from("message"), String::new());
    let mut seen = false;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if let Some(value) = line.strip_prefix("event:") {
            event = value.trim().to_owned();
            seen = true;
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push_str(value.trim_start());
            seen = true;
        } else if line.is_empty() && seen {
            return Some((event, data));
        }
    }
}

/// Sends one HTTP/1.1 POST with `Connection: close` and returns the status and body.
pub fn http1_post(stream: &mut TlsStream, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("write request");
    let mut answer = Vec::new();
    // The server closes after answering; a missing close_notify is not this test's business.
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

/// What one request over a fresh TLS connection negotiated and got.
#[derive(Debug)]
pub struct Negotiated {
    pub alpn: Option<Vec<u8>>,
    pub version: http::Version,
    pub status: http::StatusCode,
    pub body: Bytes,
}

/// POSTs `body` to `path` over a fresh TLS connection offering only `alpn`,
/// speaking h2 when the server chose it and HTTP/1.1 otherwise.
pub fn post_over_alpn(
    addr: SocketAddr,
    ca_pem: &str,
    alpn: &[u8],
    path: &str,
    body: &str,
) -> Result<Negotiated, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let connector = tokio_rustls::TlsConnector::from(client_config(ca_pem, &[alpn]));
        let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
        let tls = connector.connect(name, tcp).await.map_err(|e| e.to_string())?;
        let negotiated = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let request = http::Request::post(format!("https://localhost:{}{path}", addr.port()))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Full::new(Bytes::from(body.to_owned())))
            .map_err(|e| e.to_string())?;
        let response = if negotiated.as_deref() == Some(b"h2") {
            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            sender.send_request(request).await.map_err(|e| e.to_string())?
        } else {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            let (mut parts, body) = request.into_parts();
            parts
                .headers
                .insert("host", http::HeaderValue::from_static("localhost"));
            parts.uri = path.parse().map_err(|e: http::uri::InvalidUri| e.to_string())?;
            sender
                .send_request(http::Request::from_parts(parts, body))
                .await
                .map_err(|e| e.to_string())?
        };
        let (version, status) = (response.version(), response.status());
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok(Negotiated {
            alpn: negotiated,
            version,
            status,
            body,
        })
    })
}
