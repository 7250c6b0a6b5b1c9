//! [`RedisStore`]: the authorization server's state in a Redis server, shared by
//! every replica (a code issued by one is redeemed at another; a refresh token
//! reused anywhere revokes its family everywhere; all sign with the same keys).
//! Spoken through [`crate::store::redis::Pool`]. Every step that reads and then
//! writes is one Lua script, so replicas never race; every key of something that
//! expires carries that expiry (dynamic clients: `registration_expiry` since last
//! use; codes: their lifetime and 10 min more for reuse detection; refresh
//! tokens: their lifetime; revocations: `refresh_token_lifetime`). Static
//! clients, consents and the signing keys do not expire.
//!
//! Keys, under `redis_key_prefix` (P): `P client:ID` (JSON), `P static` (the set
//! of static client ids), `P code:HEX` and `P rt:HEX` (hashes: `grant`, `used`,
//! `family`), `P family:ID` (a revocation), `P consent:HEX` (JSON scopes; HEX is
//! the SHA-256 of subject, client and resource) and `P keys` (JSON).

use super::{Client, ClientOrigin, Consent, Grant, Store, StoreError, Stored, StoredKey, Taken, TakenRefresh, now};
use crate::config::AuthServerConfig;
use crate::store::redis::{Pool, RedisError, Target, Value};

/// Codes are kept this long after they expire, so that a late reuse is still recognised.
const CODE_KEPT_AFTER_EXPIRY: u64 = 600;

/// Stores a client; a static one joins the set of static ids, a dynamic one expires unused.
/// KEYS: client, static set. ARGV: JSON, id, "static"|"dynamic", expiry seconds.
const PUT_CLIENT: &str = "redis.call('SET', KEYS[1], ARGV[1]) \
if ARGV[3] == 'static' then redis.call('SADD', KEYS[2], ARGV[2]) \
else redis.call('SREM', KEYS[2], ARGV[2]); redis.call('EXPIRE', KEYS[1], ARGV[4]) end \
return 1";

/// Forgets static clients not named. KEYS: static set. ARGV: client key prefix, ids to keep...
const FORGET_STATIC: &str = "local keep = {} \
for i = 2, #ARGV do keep[ARGV[i]] = true end \
local n = 0 \
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do \
  if not keep[id] then redis.call('DEL', ARGV[1] .. id); redis.call('SREM', KEYS[1], id); n = n + 1 end \
end \
return n";

/// Stores a code or refresh token. KEYS: its hash. ARGV: grant JSON, family ('' for none), seconds.
const PUT_GRANT: &str = "redis.call('DEL', KEYS[1]) \
redis.call('HSET', KEYS[1], 'grant', ARGV[1]) \
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'family', ARGV[2]) end \
redis.call('EXPIRE', KEYS[1], ARGV[3]) \
return 1";

/// Takes a code: {0, grant} the first time, {1, family or ''} after, {2} unknown. KEYS: its hash.
const TAKE_CODE: &str = "local g = redis.call('HGET', KEYS[1], 'grant') \
if not g then return {2} end \
if redis.call('HSETNX', KEYS[1], 'used', '1') == 1 then return {0, g} end \
local f = redis.call('HGET', KEYS[1], 'family') \
if not f then f = '' end \
return {1, f}";

/// Records the family a code produced, if the code is still kept. KEYS: its hash. ARGV: family.
const LINK_CODE: &str = "if redis.call('EXISTS', KEYS[1]) == 1 then \
redis.call('HSET', KEYS[1], 'family', ARGV[1]) end return 1";

/// Takes a refresh token: {0, family, grant} the first time while its family lives;
/// otherwise the family is revoked and {1, family}; {2} unknown.
/// KEYS: its hash. ARGV: family key prefix, revocation seconds.
const TAKE_REFRESH: &str = "local f = redis.call('HGET', KEYS[1], 'family') \
if not f then return {2} end \
if redis.call('EXISTS', ARGV[1] .. f) == 1 or redis.call('HSETNX', KEYS[1], 'used', '1') == 0 then \
  redis.call('SET', ARGV[1] .. f, '1', 'EX', ARGV[2]) \
  return {1, f} \
end \
return {0, f, redis.call('HGET', KEYS[1], 'grant')}";

/// Compare and set of the signing keys. KEYS: keys. ARGV: expected JSON, new JSON.
/// Returns the JSON stored afterwards.
const PUT_KEYS: &str = "local current = redis.call('GET', KEYS[1]) or '[]' \
if current == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]); return ARGV[2] end \
return current";

/// The state in Redis.
pub(crate) struct RedisStore {
    pool: Pool,
    prefix: String,
    registration_expiry: u64,
    refresh_lifetime: u64,
}

fn failed(error: impl std::fmt::Display) -> StoreError {
    StoreError(format!("redis: {error}"))
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(failed)
}

fn from_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(failed)
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A bulk string's bytes (`None` for nil); anything else is a protocol surprise.
fn bulk(value: Value) -> Result<Option<Vec<u8>>, StoreError> {
    match value {
        Value::Bulk(bytes) => Ok(bytes),
        Value::Error(error) => Err(failed(error)),
        other => Err(failed(format!("unexpected reply {other:?}"))),
    }
}

fn text(value: Value) -> Result<String, StoreError> {
    let bytes = bulk(value)?.unwrap_or_default();
    String::from_utf8(bytes).map_err(failed)
}

/// A script's array reply: its leading integer tag and the rest.
fn tagged(value: Value) -> Result<(i64, Vec<Value>), StoreError> {
    match value {
        Value::Array(Some(mut items)) if !items.is_empty() => match items.remove(0) {
            Value::Integer(tag) => Ok((tag, items)),
            other => Err(failed(format!("unexpected tag {other:?}"))),
        },
        Value::Error(error) => Err(failed(error)),
        other => Err(failed(format!("unexpected reply {other:?}"))),
    }
}

fn ok(value: Value) -> Result<(), StoreError> {
    match value {
        Value::Error(error) => Err(failed(error)),
        _ => Ok(()),
    }
}

impl RedisStore {
    /// A store on the server at `url` (nothing is connected yet), with the
    /// expiries and key prefix of `config`.
    pub(crate) fn new(target: Target, config: &AuthServerConfig) -> Result<RedisStore, StoreError> {
        Ok(RedisStore {
            prefix: target.prefix.clone(),
            pool: Pool::new(target),
            registration_expiry: config.registration_expiry.0.as_secs().max(1),
            refresh_lifetime: config.refresh_token_lifetime.0.as_secs().max(1),
        })
    }

    fn key(&self, kind: &str, id: &str) -> String {
        format!("{}{kind}{id}", self.prefix)
    }

    async fn run(&self, args: &[&[u8]]) -> Result<Value, StoreError> {
        self.pool.command(args).await.map_err(|e: RedisError| failed(e))
    }

    /// `EVAL script` with `keys` and `argv`.
    async fn eval(&self, script: &str, keys: &[&str], argv: &[&str]) -> Result<Value, StoreError> {
        let count = keys.len().to_string();
        let mut args: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), count.as_bytes()];
        args.extend(keys.iter().map(|k| k.as_bytes()));
        args.extend(argv.iter().map(|a| a.as_bytes()));
        self.run(&args).await
    }

    /// Seconds until `expires_at` (at least one, so the key never lives forever).
    fn seconds_until(expires_at: u64) -> String {
        expires_at.saturating_sub(now()).max(1).to_string()
    }
}

impl Store for RedisStore {
    fn put_client(&self, client: Client) -> Stored<'_, ()> {
        Box::pin(async move {
            let kind = match client.origin {
                ClientOrigin::Static => "static",
                _ => "dynamic",
            };
            let (key, set) = (self.key("client:", &client.client_id), self.key("static", ""));
            let expiry = self.registration_expiry.to_string();
            let json = to_json(&client)?;
            ok(self
                .eval(PUT_CLIENT, &[&key, &set], &[&json, &client.client_id, kind, &expiry])
                .await?)
        })
    }

    fn client(&self, client_id: &str, _now: u64) -> Stored<'_, Option<Client>> {
        let key = self.key("client:", client_id);
        Box::pin(async move {
            let Some(bytes) = bulk(self.run(&[b"GET", key.as_bytes()]).await?)? else {
                return Ok(None);
            };
            let client: Client = from_json(&bytes)?;
            if client.origin != ClientOrigin::Static {
                // Used now: it lives another `registration_expiry`.
                let expiry = self.registration_expiry.to_string();
                ok(self.run(&[b"EXPIRE", key.as_bytes(), expiry.as_bytes()]).await?)?;
            }
            Ok(Some(client))
        })
    }

    fn expire_clients(&self, _before: u64) -> Stored<'_, usize> {
        // Redis expires unused registrations itself.
        Box::pin(std::future::ready(Ok(0)))
    }

    fn forget_static_clients(&self, keep: Vec<String>) -> Stored<'_, usize> {
        Box::pin(async move {
            let (set, prefix) = (self.key("static", ""), self.key("client:", ""));
            let mut argv: Vec<&str> = vec![&prefix];
            argv.extend(keep.iter().map(String::as_str));
            match self.eval(FORGET_STATIC, &[&set], &argv).await? {
                Value::Integer(n) => Ok(usize::try_from(n).unwrap_or(0)),
                other => Err(failed(format!("unexpected reply {other:?}"))),
            }
        })
    }

    fn put_code(&self, digest: [u8; 32], grant: Grant) -> Stored<'_, ()> {
        Box::pin(async move {
            let key = self.key("code:", &hex(&digest));
            let seconds = Self::seconds_until(grant.expires_at.saturating_add(CODE_KEPT_AFTER_EXPIRY));
            ok(self
                .eval(PUT_GRANT, &[&key], &[&to_json(&grant)?, "", &seconds])
                .await?)
        })
    }

    fn take_code(&self, digest: [u8; 32]) -> Stored<'_, Taken> {
        Box::pin(async move {
            let key = self.key("code:", &hex(&digest));
            let (tag, mut rest) = tagged(self.eval(TAKE_CODE, &[&key], &[]).await?)?;
            match (tag, rest.pop()) {
                (0, Some(grant)) => Ok(Taken::Fresh(from_json(&bulk(grant)?.unwrap_or_default())?)),
                (1, Some(family)) => {
                    let family = text(family)?;
                    Ok(Taken::Reused((!family.is_empty()).then_some(family)))
                }
                _ => Ok(Taken::Missing),
            }
        })
    }

    fn link_code(&self, digest: [u8; 32], family: String) -> Stored<'_, ()> {
        Box::pin(async move {
            let key = self.key("code:", &hex(&digest));
            ok(self.eval(LINK_CODE, &[&key], &[&family]).await?)
        })
    }

    fn put_refresh(&self, digest: [u8; 32], family: String, grant: Grant) -> Stored<'_, ()> {
        Box::pin(async move {
            let key = self.key("rt:", &hex(&digest));
            let seconds = Self::seconds_until(grant.expires_at);
            ok(self
                .eval(PUT_GRANT, &[&key], &[&to_json(&grant)?, &family, &seconds])
                .await?)
        })
    }

    fn take_refresh(&self, digest: [u8; 32]) -> Stored<'_, TakenRefresh> {
        Box::pin(async move {
            let key = self.key("rt:", &hex(&digest));
            let families = self.key("family:", "");
            let seconds = self.refresh_lifetime.to_string();
            let (tag, rest) = tagged(self.eval(TAKE_REFRESH, &[&key], &[&families, &seconds]).await?)?;
            let mut rest = rest.into_iter();
            match (tag, rest.next(), rest.next()) {
                (0, Some(family), Some(grant)) => Ok(TakenRefresh::Fresh(
                    text(family)?,
                    from_json(&bulk(grant)?.unwrap_or_default())?,
                )),
                (1, Some(family), _) => Ok(TakenRefresh::Reused(text(family)?)),
                _ => Ok(TakenRefresh::Missing),
            }
        })
    }

    fn revoke_family(&self, family: String) -> Stored<'_, ()> {
        Box::pin(async move {
            let key = self.key("family:", &family);
            let seconds = self.refresh_lifetime.to_string();
            ok(self
                .run(&[b"SET", key.as_bytes(), b"1", b"EX", seconds.as_bytes()])
                .await?)
        })
    }

    fn family_of(&self, digest: [u8; 32]) -> Stored<'_, Option<(String, String)>> {
        Box::pin(async move {
            let key = self.key("rt:", &hex(&digest));
            let reply = self.run(&[b"HMGET", key.as_bytes(), b"family", b"grant"]).await?;
            let Value::Array(Some(items)) = reply else {
                return Err(failed(format!("unexpected reply {reply:?}")));
            };
            let mut items = items.into_iter();
            match (items.next().map(bulk), items.next().map(bulk)) {
                (Some(Ok(Some(family))), Some(Ok(Some(grant)))) => {
                    let family = String::from_utf8(family).map_err(failed)?;
                    Ok(Some((family, from_json::<Grant>(&grant)?.client_id)))
                }
                _ => Ok(None),
            }
        })
    }

    fn consent(&self, subject: &str, client_id: &str, resource: &str) -> Stored<'_, Option<Vec<String>>> {
        let key = self.consent_key(subject, client_id, resource);
        Box::pin(async move {
            match bulk(self.run(&[b"GET", key.as_bytes()]).await?)? {
                Some(bytes) => Ok(Some(from_json(&bytes)?)),
                None => Ok(None),
            }
        })
    }

    fn put_consent(&self, consent: Consent) -> Stored<'_, ()> {
        let key = self.consent_key(&consent.subject, &consent.client_id, &consent.resource);
        Box::pin(async move {
            let json = to_json(&consent.scopes)?;
            ok(self.run(&[b"SET", key.as_bytes(), json.as_bytes()]).await?)
        })
    }

    fn signing_keys(&self) -> Stored<'_, Vec<StoredKey>> {
        let key = self.key("keys", "");
        Box::pin(async move {
            match bulk(self.run(&[b"GET", key.as_bytes()]).await?)? {
                Some(bytes) => from_json(&bytes),
                None => Ok(Vec::new()),
            }
        })
    }

    fn put_signing_keys(&self, expected: Vec<StoredKey>, keys: Vec<StoredKey>) -> Stored<'_, Vec<StoredKey>> {
        let key = self.key("keys", "");
        Box::pin(async move {
            let (expected, next) = (to_json(&expected)?, to_json(&keys)?);
            let stored = bulk(self.eval(PUT_KEYS, &[&key], &[&expected, &next]).await?)?;
            from_json(&stored.unwrap_or_else(|| b"[]".to_vec()))
        })
    }
}

impl RedisStore {
    fn consent_key(&self, subject: &str, client_id: &str, resource: &str) -> String {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        hasher.update(subject.as_bytes());
        hasher.update([0]);
        hasher.update(client_id.as_bytes());
        hasher.update([0]);
        hasher.update(resource.as_bytes());
        self.key("consent:", &hex(&hasher.finalize()))
    }
}
