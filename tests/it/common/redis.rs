//! `redis-server` processes the tests start on free loopback ports (installed by
//! `tests/system-deps.sh`): a plain one, or one each test configures further (TLS,
//! ACL users, cluster mode). None keeps anything on disk.

use std::process::{Command, Stdio};
use std::time::Duration;

use super::{Proc, free_port, listening};

/// A plain `redis-server` of its own on a free loopback port, killed on drop.
pub struct RedisServer {
    _proc: Proc,
    /// The port it listens on (plain TCP).
    pub port: u16,
}

impl RedisServer {
    /// Starts one; fails the test if `redis-server` is not installed.
    pub fn start() -> RedisServer {
        let port = free_port();
        let proc = redis_server("redis-server", port, |command| {
            command.args(["--port", &port.to_string()]);
        });
        RedisServer { _proc: proc, port }
    }

    /// `redis-cli` (redis-server's package depends on it) on database `db`: the reply's lines.
    pub fn cli(&self, db: u32, args: &[&str]) -> Vec<String> {
        let output = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "-n", &db.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        assert!(output.status.success(), "redis-cli {args:?}");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// Starts `redis-server` bound to 127.0.0.1 without persistence, with the arguments
/// `configure` adds (its ports among them), and waits until it listens on `port`;
/// `name` names it in failures. Fails the test if `redis-server` is not installed.
pub fn redis_server(name: &str, port: u16, configure: impl FnOnce(&mut Command)) -> Proc {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "redis-server is not installed: tests/system-deps.sh installs it (apt-get install redis-server)"
    );
    let mut command = Command::new("redis-server");
    command.args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
    configure(&mut command);
    command.stdout(Stdio::null()).stderr(Stdio::null());
    let proc = Proc::spawn(name, &mut command);
    assert!(
        listening(("127.0.0.1", port), Duration::from_secs(10)),
        "{name} did not listen on {port}"
    );
    proc
}
