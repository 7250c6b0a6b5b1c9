//! `[listen.tls]` and `[upstreams.tls]`: the certificate files eragate serves
//! and trusts, checked by loading them (so `check-config` names an unreadable
//! file or a key that does not match its certificate).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::ConfigIssue;
use super::duration::Humantime;
use crate::tls::{self, ClientTls};

/// `[listen.tls]`: HTTPS on the client listener (HTTP/1.1 and h2 by ALPN).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenTlsConfig {
    /// PEM file with the certificate chain, leaf first.
    pub(crate) cert: PathBuf,
    /// PEM file with the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub(crate) key: PathBuf,
    /// How often the two files are checked for a change (modification time,
    /// size); a changed pair is loaded for new connections. `"0s"` = never.
    /// Default 5 s.
    #[serde(default = "default_reload_interval")]
    pub reload_interval: Humantime,
}

impl ListenTlsConfig {
    /// A certificate and key with every other key at its default.
    pub fn new(cert: PathBuf, key: PathBuf) -> ListenTlsConfig {
        ListenTlsConfig {
            cert,
            key,
            reload_interval: default_reload_interval(),
        }
    }
}

fn default_reload_interval() -> Humantime {
    Humantime(Duration::from_secs(5))
}

/// `[upstreams.tls]`: how eragate checks an `https://` upstream, and what it presents.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTlsConfig {
    /// PEM bundle of the CA certificates trusted for this upstream, instead of
    /// the public roots compiled into eragate. Default: the public roots.
    pub(crate) ca: Option<PathBuf>,
    /// PEM client certificate chain for mutual TLS (with `key`).
    pub(crate) cert: Option<PathBuf>,
    /// PEM private key of `cert`.
    pub(crate) key: Option<PathBuf>,
}

impl UpstreamTlsConfig {
    /// The client settings these keys describe.
    pub(crate) fn client(&self) -> ClientTls<'_> {
        ClientTls {
            ca: self.ca.as_deref(),
            identity: self.cert.as_deref().zip(self.key.as_deref()),
        }
    }
}

/// The problems of `[listen.tls]` at `at` (the files are loaded now).
pub(super) fn listen_tls_issues(config: &ListenTlsConfig, at: &str) -> Vec<ConfigIssue> {
    match tls::certified_key(&config.cert, &config.key) {
        Ok(_) => Vec::new(),
        Err(error) => vec![ConfigIssue {
            path: format!("{at}.{}", blamed_key(&error, &config.key)),
            message: error.to_string(),
        }],
    }
}

/// The problems of `[upstreams.tls]` at `at`.
pub(super) fn upstream_tls_issues(config: &UpstreamTlsConfig, at: &str) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    if config.cert.is_some() != config.key.is_some() {
        issues.push(ConfigIssue {
            path: format!("{at}.{}", if config.cert.is_some() { "key" } else { "cert" }),
            message: "a client certificate needs both cert and key".into(),
        });
        return issues;
    }
    if let Some(ca) = &config.ca
        && let Err(error) = tls::roots(ca)
    {
        issues.push(ConfigIssue {
            path: format!("{at}.ca"),
            message: error.to_string(),
        });
    }
    if let (Some(cert), Some(key)) = (&config.cert, &config.key)
        && let Err(error) = tls::certified_key(cert, key)
    {
        issues.push(ConfigIssue {
            path: format!("{at}.{}", blamed_key(&error, key)),
            message: error.to_string(),
        });
    }
    issues
}

/// The problem of a CA bundle at `at` (`[auth.oauth] ca`, a credential's `ca`), if any.
pub(super) fn ca_issue(ca: &Path, at: &str) -> Option<ConfigIssue> {
    tls::roots(ca).err().map(|error| ConfigIssue {
        path: at.to_owned(),
        message: error.to_string(),
    })
}

/// `key` when the error is about the key file, else `cert`.
fn blamed_key(error: &tls::TlsError, key: &Path) -> &'static str {
    let about_key = match error {
        tls::TlsError::Unreadable { path, .. } | tls::TlsError::Malformed { path, .. } => Path::new(path) == key,
        tls::TlsError::Unusable { .. } => true,
    };
    if about_key { "key" } else { "cert" }
}
