//! `[redis]` shared by replicas, against real `redis-server` processes the tests start
//! with TLS (a CA and server certificate made here, `--port 0 --tls-port`) and an ACL
//! user with a password (the default user off):
//! - three replicas sharing a limit of 10 per minute let exactly 10 of 30 calls through;
//! - a legacy session ended by DELETE on one replica is refused (404) by the two
//!   others within 1 s, one holding it already, one never having seen it;
//! - a wrong CA, or a wrong password, refuses shared counts (`on_error = "closed"`) on
//!   first use with a log naming the key (`redis.tls_ca`, `redis.url`), never the password;
//! - the authorization server's flow spans three replicas over the TLS Redis: a client
//!   registers on one, authorises on another, redeems on a third and refreshes on the first;
//! - Redis stopped mid-run: shared counts are refused (`on_error = "closed"`), a replica
//!   keeps serving the session it holds and refuses (404) one it would have to resume (fail
//!   closed), every answer within the timeout;
//! - a Redis Cluster of three nodes (plain TCP) shares the limit and the ended sessions the same way.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::auth_server::{code_for, exchange, refresh, register_public, server_toml};
use common::redis::redis_server;
use common::tls::{TestCa, write_file};
use common::*;
use serde_json::json;

const KEY: &str = "+lvmRArTdTjUBLud1gW6jkHU/yPJ938rmqyBz7HEOk4=";
const PASSWORD: &str = "s3cret-pw";
const URL_ENV: &str = "ERAGATE_TEST_REDIS_URL";

/// A `redis-server` speaking only TLS, with one ACL user `app` (password [`PASSWORD`]).
struct TlsRedis {
    _proc: Proc,
    port: u16,
    ca: PathBuf,
    _dir: tempfile::TempDir,
}

impl TlsRedis {
    fn start() -> TlsRedis {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = TestCa::new("redis test CA");
        let server = ca.localhost("redis");
        let ca_path = write_file(dir.path(), "ca.pem", &ca.pem());
        let cert = write_file(dir.path(), "redis.pem", &server.cert);
        let key = write_file(dir.path(), "redis.key", &server.key);
        let port = free_port();
        let proc = redis_server("redis-server (TLS)", port, |command| {
            command
                .args([
                    "--port",
                    "0",
                    "--tls-port",
                    &port.to_string(),
                    "--tls-auth-clients",
                    "no",
                ])
                .arg("--tls-cert-file")
                .arg(&cert)
                .arg("--tls-key-file")
                .arg(&key)
                .arg("--tls-ca-cert-file")
                .arg(&ca_path)
                .args(["--user", "default", "off"])
                .args(["--user", "app", "on", &format!(">{PASSWORD}"), "~*", "&*", "+@all"]);
        });
        TlsRedis {
            _proc: proc,
            port,
            ca: ca_path,
            _dir: dir,
        }
    }

    fn url(&self, password: &str) -> String {
        format!("rediss://app:{password}@localhost:{}", self.port)
    }
}

/// A Redis Cluster of `nodes` plain-TCP `redis-server` processes, each a master
/// (`redis-cli --cluster create ... --cluster-replicas 0`).
struct RedisCluster {
    _procs: Vec<Proc>,
    ports: Vec<u16>,
    _dir: tempfile::TempDir,
}

impl RedisCluster {
    fn start(nodes: usize) -> RedisCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut procs = Vec::new();
        let mut ports = Vec::new();
        for i in 0..nodes {
            let port = free_port();
            procs.push(redis_server("redis-server (cluster)", port, |command| {
                command
                    .args(["--port", &port.to_string()])
                    .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"])
                    .arg("--cluster-config-file")
                    .arg(dir.path().join(format!("nodes-{i}.conf")))
                    .arg("--dir")
                    .arg(dir.path());
            }));
            ports.push(port);
        }
        let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli (tests/system-deps.sh installs it with redis-server)");
        assert!(
            created.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&created.stdout)
        );
        let ready = poll_until(Duration::from_secs(20), || {
            ports.iter().all(|port| {
                Command::new("redis-cli")
                    .args(["-p", &port.to_string(), "cluster", "info"])
                    .output()
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
            })
        });
        assert!(ready, "the redis cluster did not reach cluster_state:ok");
        RedisCluster {
            _procs: procs,
            ports,
            _dir: dir,
        }
    }
}

/// A replica of `upstream_toml` using Redis through `redis_toml` (`[redis]` and the rest).
fn replica(redis_toml: &str, upstream_toml: &str, env: &[(&str, &str)]) -> Eragate {
    let config = format!(
        "[sessions]\nkey = \"{KEY}\"\n\
         [rate_limits]\ntools.echo = {{ requests = 10, per = \"1m\", shared = true }}\n\
         [rate_limits.redis]\non_error = \"closed\"\n\
         {redis_toml}\n{upstream_toml}"
    );
    Eragate::start_with_env(&config, &[], env)
}

fn redis_toml(ca: &Path) -> String {
    // A long timeout: a loaded test machine may take more than the default 250 ms to
    // connect, and a timeout names no key.
    format!(
        "[redis]\nurl_env = \"{URL_ENV}\"\ntls_ca = \"{}\"\ntimeout = \"5s\"\n",
        ca.display()
    )
}

fn echo(gateway: &Eragate, id: u64) -> Reply {
    modern_call(&gateway.url(), id, "echo", json!({"text": "x"}))
}

/// How many of `calls` echoes spread round-robin over `replicas` passed, and the
/// statuses of the others.
fn spread_calls(replicas: &[&Eragate], calls: u64) -> (usize, Vec<u16>) {
    let mut passed = 0;
    let mut refused = Vec::new();
    for id in 0..calls {
        let reply = echo(replicas[id as usize % replicas.len()], id + 1);
        match reply.status {
            200 if reply.body.contains("echo: x") => passed += 1,
            status => refused.push(status),
        }
    }
    (passed, refused)
}

#[test]
fn three_replicas_share_limits_and_ended_sessions_through_tls_redis() {
    let redis = TlsRedis::start();
    let url = redis.url(PASSWORD);
    three_replicas_share_limits_and_ended_sessions(&redis_toml(&redis.ca), &[(URL_ENV, url.as_str())]);
}

#[test]
fn three_replicas_share_limits_and_ended_sessions_through_a_redis_cluster() {
    let cluster = RedisCluster::start(3);
    let nodes: Vec<String> = cluster
        .ports
        .iter()
        .map(|p| format!("\"redis://127.0.0.1:{p}\""))
        .collect();
    let redis_toml = format!("[redis]\ncluster = [{}]\ntimeout = \"5s\"\n", nodes.join(", "));
    three_replicas_share_limits_and_ended_sessions(&redis_toml, &[]);
}

/// Three replicas on `redis_toml`: 10 of 30 echoes pass; a session DELETEd on one is
/// refused by the others within 1 s.
fn three_replicas_share_limits_and_ended_sessions(redis_toml: &str, env: &[(&str, &str)]) {
    let upstream = LegacyHttpServer::start(&[]);
    let upstream_toml = remote_upstream_toml("http", &upstream.url, "");
    let replicas: Vec<Eragate> = (0..3).map(|_| replica(redis_toml, &upstream_toml, env)).collect();
    let [a, b, c] = [&replicas[0], &replicas[1], &replicas[2]];
    let mut problems = Vec::new();

    let (passed, refused) = spread_calls(&[a, b, c], 30);
    if passed != 10 || refused != [429; 20] {
        problems.push(format!(
            "10 of 30 calls should pass: {passed} passed, refused {refused:?}"
        ));
    }

    // A legacy session minted on A, used on B (which then holds it), never seen by C.
    let version = "2025-11-25";
    let (session, _) = legacy_initialize(&a.url(), version);
    let call = |url: &str| {
        // `ping`: the echo budget is spent above.
        legacy_request(url, &session, version, 7, "ping", json!({})).status
    };
    if call(&b.url()) != 200 {
        problems.push("the session did not work on B before its end".into());
    }
    let deleted = send("DELETE", &a.url(), &legacy_headers(&session, version), None);
    let ended_at = Instant::now();
    if deleted.status != 200 {
        problems.push(format!("DELETE on A: {} {}", deleted.status, deleted.body));
    }
    let refused_everywhere = poll_until(Duration::from_secs(1), || {
        call(&b.url()) == 404 && call(&c.url()) == 404
    });
    if !refused_everywhere {
        problems.push(format!(
            "after DELETE on A, within 1 s: B answered {}, C answered {} (expected 404 from both)",
            call(&b.url()),
            call(&c.url())
        ));
    } else {
        eprintln!(
            "ended session refused by B and C {:?} after DELETE on A",
            ended_at.elapsed()
        );
    }
    if call(&a.url()) != 404 {
        problems.push("A still serves the session it ended".into());
    }
    // A new session still moves between replicas.
    let (fresh, _) = legacy_initialize(&b.url(), version);
    let status = legacy_request(&c.url(), &fresh, version, 8, "ping", json!({})).status;
    if status != 200 {
        problems.push(format!("a new session minted on B, used on C: {status}"));
    }
    for (name, replica) in [("A", a), ("B", b), ("C", c)] {
        if replica.log().contains(PASSWORD) {
            problems.push(format!("{name}'s log holds the redis password"));
        }
    }
    assert_no_problems(&problems, &[("A", a.log()), ("B", b.log()), ("C", c.log())]);
}

#[test]
fn a_wrong_ca_or_password_refuses_counts_naming_the_key() {
    let redis = TlsRedis::start();
    let upstream_toml = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let dir = tempfile::tempdir().expect("tempdir");
    let other_ca = write_file(dir.path(), "other.pem", &TestCa::new("another CA").pem());
    let good_url = redis.url(PASSWORD);
    let bad_url = redis.url("not-the-password");
    let wrong_ca = replica(&redis_toml(&other_ca), &upstream_toml, &[(URL_ENV, &good_url)]);
    let wrong_password = replica(&redis_toml(&redis.ca), &upstream_toml, &[(URL_ENV, &bad_url)]);
    let right = replica(&redis_toml(&redis.ca), &upstream_toml, &[(URL_ENV, &good_url)]);
    let mut problems = Vec::new();
    for (name, gateway, key) in [
        ("wrong CA", &wrong_ca, "redis.tls_ca"),
        ("wrong password", &wrong_password, "redis.url_env"),
    ] {
        let reply = echo(gateway, 1);
        if reply.status != 429 {
            problems.push(format!(
                "{name}: a shared count should be refused (closed): {} {}",
                reply.status, reply.body
            ));
        }
        let named = poll_until(Duration::from_secs(2), || {
            gateway
                .log()
                .lines()
                .any(|l| l.contains("on_error = closed") && l.contains(key))
        });
        if !named {
            problems.push(format!("{name}: no log line names {key}"));
        }
        if gateway.log().contains("not-the-password") || gateway.log().contains(PASSWORD) {
            problems.push(format!("{name}: the log holds a password"));
        }
    }
    let reply = echo(&right, 2);
    if reply.status != 200 {
        problems.push(format!("the right CA and password: {} {}", reply.status, reply.body));
    }
    assert_no_problems(
        &problems,
        &[
            ("wrong CA", wrong_ca.log()),
            ("wrong password", wrong_password.log()),
            ("right", right.log()),
        ],
    );
}

#[test]
fn the_authorization_flow_spans_three_replicas_over_tls_redis() {
    let redis = TlsRedis::start();
    let url = redis.url(PASSWORD);
    let addrs: Vec<std::net::SocketAddr> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()).parse().expect("addr"))
        .collect();
    let origins: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
    // Every replica serves one public URL (the first's, standing for the load balancer).
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let config = format!(
        "[listen]\npublic_url = \"{}\"\n{}\n{}\n{upstream}",
        origins[0],
        server_toml("storage = \"redis\""),
        redis_toml(&redis.ca)
    );
    let replicas: Vec<Eragate> = addrs
        .iter()
        .map(|&addr| Eragate::start_at(addr, &config, &[], &[(URL_ENV, &url)]))
        .collect();
    let [a, b, c] = [&origins[0], &origins[1], &origins[2]];
    let resource = format!("{a}/mcp");
    let mut problems = Vec::new();

    let client_id = register_public(a);
    let (params, verifier) = code_for(b, &client_id, &resource);
    let redeemed = exchange(c, &client_id, &params["code"], &verifier);
    let refresh_token = redeemed.json()["refresh_token"].as_str().map(str::to_owned);
    match (redeemed.status, refresh_token) {
        (200, Some(token)) => {
            let refreshed = refresh(a, &client_id, &token);
            if refreshed.status != 200 || refreshed.json()["access_token"].as_str().is_none() {
                problems.push(format!("refresh at A: {} {}", refreshed.status, refreshed.body));
            }
        }
        (status, _) => problems.push(format!(
            "a code authorised at B, redeemed at C: {status} {}",
            redeemed.body
        )),
    }
    let logs: Vec<(&str, String)> = ["A", "B", "C"]
        .into_iter()
        .zip(replicas.iter().map(Eragate::log))
        .collect();
    for (name, log) in &logs {
        if log.contains(PASSWORD) {
            problems.push(format!("{name}'s log holds the redis password"));
        }
    }
    assert_no_problems(&problems, &logs);
}

#[test]
fn redis_stopped_mid_run_fails_closed_without_hanging() {
    let redis = TlsRedis::start();
    let upstream = LegacyHttpServer::start(&[]);
    let upstream_toml = remote_upstream_toml("http", &upstream.url, "");
    let url = redis.url(PASSWORD);
    let env = [(URL_ENV, url.as_str())];
    let a = replica(&redis_toml(&redis.ca), &upstream_toml, &env);
    let b = replica(&redis_toml(&redis.ca), &upstream_toml, &env);
    let mut problems = Vec::new();
    let version = "2025-11-25";
    let (session, _) = legacy_initialize(&a.url(), version);
    if echo(&b, 1).status != 200 {
        problems.push("a shared count with redis up was refused".into());
    }
    drop(redis);
    // Each answer within the 5 s timeout (and a margin), never a hang.
    let timed = |what: &str, problems: &mut Vec<String>, f: &dyn Fn() -> u16, expected: u16| {
        let started = Instant::now();
        let status = f();
        let took = started.elapsed();
        if status != expected || took > Duration::from_secs(7) {
            problems.push(format!(
                "{what}: {status} after {took:?} (expected {expected} within 7 s)"
            ));
        }
    };
    let session = session.as_str();
    let ping = |url: String| move || legacy_request(&url, session, version, 9, "ping", json!({})).status;
    timed("the session A holds, on A", &mut problems, &ping(a.url()), 200);
    timed("the session A holds, resumed on B", &mut problems, &ping(b.url()), 404);
    timed("a shared count on A", &mut problems, &|| echo(&a, 2).status, 429);
    if !b.log().contains("refusing to resume the session (fail closed)") {
        problems.push("B did not log why it refused the resume".into());
    }
    assert_no_problems(&problems, &[("A", a.log()), ("B", b.log())]);
}
