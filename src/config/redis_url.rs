//! Where a Redis server is, from a `redis://` URL: the one syntax of
//! `[auth.server] redis_url`, checked with the rest of the configuration and
//! used by [`crate::store::redis`] to connect.

/// Where a Redis server is, and how to log in to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RedisEndpoint {
    /// `host:port`.
    pub(crate) address: String,
    /// The password of `AUTH`, if any.
    pub(crate) password: Option<String>,
    /// The database of `SELECT`, if not 0.
    pub(crate) database: Option<u32>,
}

impl RedisEndpoint {
    /// `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (port 6379 by default).
    pub(crate) fn parse(text: &str) -> Result<RedisEndpoint, String> {
        let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL ({e})"))?;
        if url.scheme() != "redis" {
            return Err("must be a redis:// URL (plain TCP; rediss:// is not supported)".into());
        }
        let host = url.host_str().filter(|h| !h.is_empty()).ok_or("names no host")?;
        let address = format!("{host}:{}", url.port().unwrap_or(6379));
        let password = url.password().map(percent_decode).filter(|p| !p.is_empty());
        let database = match url.path().trim_start_matches('/') {
            "" => None,
            db => Some(
                db.parse::<u32>()
                    .map_err(|_| format!("{db:?} is not a database number"))?,
            ),
        };
        if url.query().is_some() || url.fragment().is_some() {
            return Err("takes no query or fragment".into());
        }
        Ok(RedisEndpoint {
            address,
            password,
            database: database.filter(|&db| db != 0),
        })
    }
}

fn percent_decode(text: &str) -> String {
    url::form_urlencoded::parse(format!("p={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_from_urls() {
        let at = |address: &str, password: Option<&str>, database: Option<u32>| {
            Ok(RedisEndpoint {
                address: address.into(),
                password: password.map(str::to_owned),
                database,
            })
        };
        let cases: Vec<(&str, Result<RedisEndpoint, ()>)> = vec![
            ("redis://127.0.0.1:6380", at("127.0.0.1:6380", None, None)),
            ("redis://localhost", at("localhost:6379", None, None)),
            (
                "redis://:s%40cret@10.0.0.1:1/2",
                at("10.0.0.1:1", Some("s@cret"), Some(2)),
            ),
            ("redis://u:pw@h:1/0", at("h:1", Some("pw"), None)),
            ("rediss://h:1", Err(())),
            ("http://h:1", Err(())),
            ("redis://h:1/x", Err(())),
            ("redis://h:1/?a=b", Err(())),
            ("127.0.0.1:6379", Err(())),
        ];
        for (text, expected) in cases {
            assert_eq!(RedisEndpoint::parse(text).map_err(|_| ()), expected, "{text}");
        }
    }
}
