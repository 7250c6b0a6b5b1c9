//! Starting one stdio child: the command line (behind a parent-death signal
//! when util-linux `setpriv` is there), the environment it may see (an
//! allowlist, never eragate's secrets), and its stderr, read in bounded lines
//! into eragate's log at a bounded rate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, Command};

use crate::config::StdioConfig;

/// Variables a child inherits from eragate's environment unless its
/// `inherit_env` replaces the list: what a shell, `npx`/node and Python need
/// to start and to fetch packages (locale, home, temp dir, proxies and CA
/// bundles). `NAME_*` matches every name with that prefix.
pub(crate) const DEFAULT_INHERIT_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "TMPDIR",
    "XDG_*",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
];

/// Names eragate reads its own secrets from start with this: a pattern never
/// matches them, only an exact name does.
const OWN_PREFIX: &str = "ERAGATE_";
/// Longest stderr line logged; the rest of a longer line is discarded unread into memory.
pub(crate) const MAX_STDERR_LINE: usize = 8 * 1024;
/// Most stderr lines logged per child per second; the others are counted and reported.
const STDERR_LINES_PER_SECOND: u32 = 100;
/// Where util-linux installs `setpriv` (Debian: the essential `util-linux` package).
const SETPRIV: &[&str] = &["/usr/bin/setpriv", "/bin/setpriv"];

/// The environment a child of `config` starts with: the variables of
/// `inherited` that its `inherit_env` (else [`DEFAULT_INHERIT_ENV`]) names,
/// then its configured `env`. A pattern (`NAME_*`) never matches `ERAGATE_*`
/// or a name in `protected` (variables holding eragate's secrets); an exact
/// name does, since that is an explicit choice.
pub(crate) fn child_env(
    config: &StdioConfig,
    protected: &[String],
    inherited: impl IntoIterator<Item = (String, String)>,
) -> BTreeMap<String, String> {
    let defaults: Vec<String>;
    let patterns: &[String] = match &config.inherit_env {
        Some(patterns) => patterns,
        None => {
            defaults = DEFAULT_INHERIT_ENV.iter().map(|s| (*s).to_owned()).collect();
            &defaults
        }
    };
    let mut env: BTreeMap<String, String> = inherited
        .into_iter()
        .filter(|(name, _)| patterns.iter().any(|p| allowed(p, name, protected)))
        .collect();
    env.extend(config.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

fn allowed(pattern: &str, name: &str, protected: &[String]) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => {
            name.starts_with(prefix) && !name.starts_with(OWN_PREFIX) && !protected.iter().any(|p| p == name)
        }
        None => pattern == name,
    }
}

/// The child's command: the program resolved on the child's own `PATH`, run
/// through `setpriv --pdeathsig KILL` when available so it dies with eragate
/// even when eragate is killed outright (the signal is the kernel's, tied to
/// the tokio worker thread that spawns; those live as long as the runtime).
/// `Err` names why the program cannot be started.
pub(crate) fn command(config: &StdioConfig, protected: &[String]) -> Result<Command, String> {
    let (program, args) = config.command.split_first().ok_or("empty command")?;
    let env = child_env(config, protected, std::env::vars());
    let resolved = resolve(program, env.get("PATH").map(String::as_str), config.cwd.as_deref())
        .ok_or_else(|| format!("cannot start {program:?}: not found (on the child's PATH)"))?;
    let mut command = match setpriv() {
        Some(setpriv) => {
            let mut command = Command::new(setpriv);
            command.args(["--pdeathsig", "KILL", "--"]).arg(&resolved);
            command
        }
        None => Command::new(&resolved),
    };
    command
        .args(args)
        .env_clear()
        .envs(&env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    Ok(command)
}

/// `program` as a path: as given when it names a path (relative to `cwd`),
/// else the first executable file of that name on `path`.
fn resolve(program: &str, path: Option<&str>, cwd: Option<&Path>) -> Option<PathBuf> {
    if program.contains('/') {
        let candidate = match cwd {
            Some(cwd) if !program.starts_with('/') => cwd.join(program),
            _ => PathBuf::from(program),
        };
        return candidate.is_file().then(|| PathBuf::from(program));
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `setpriv`, when this machine has it (looked up once).
fn setpriv() -> Option<&'static Path> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let found = SETPRIV.iter().map(PathBuf::from).find(|p| is_executable(p));
            if found.is_none() {
                tracing::warn!(
                    "util-linux setpriv not found: stdio children outlive an eragate that is killed with SIGKILL"
                );
            }
            found
        })
        .as_deref()
}

/// Logs the child's stderr line by line, each line cut at [`MAX_STDERR_LINE`]
/// bytes and at most `STDERR_LINES_PER_SECOND` lines a second.
pub(crate) async fn log_stderr(upstream: Arc<str>, pid: u32, stderr: ChildStderr) {
    let mut reader = BufReader::with_capacity(MAX_STDERR_LINE, stderr);
    let mut lines = BoundedLines::new(MAX_STDERR_LINE);
    let mut budget = LogBudget::new(Instant::now());
    loop {
        let buf = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(buf) => buf,
        };
        let (used, line) = lines.feed(buf);
        reader.consume(used);
        if let Some(line) = line {
            log_line(&upstream, pid, &line, &mut budget);
        }
    }
    if let Some(line) = lines.finish() {
        log_line(&upstream, pid, &line, &mut budget);
    }
}

fn log_line(upstream: &str, pid: u32, line: &Line, budget: &mut LogBudget) {
    match budget.admit(Instant::now()) {
        Admit::Log { suppressed } => {
            if suppressed > 0 {
                tracing::warn!(target: "eragate::upstream::stderr", upstream, pid, suppressed, "stderr lines not logged (rate limit)");
            }
            let text = String::from_utf8_lossy(&line.text);
            if line.dropped > 0 {
                tracing::info!(target: "eragate::upstream::stderr", upstream, pid, truncated_bytes = line.dropped, "{text}…[truncated]");
            } else {
                tracing::info!(target: "eragate::upstream::stderr", upstream, pid, "{text}");
            }
        }
        Admit::Suppress => {}
    }
}

/// One stderr line as logged: its first bytes, and how many more were dropped.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Line {
    /// At most the bound's bytes, without the newline.
    pub(crate) text: Vec<u8>,
    /// Bytes of the line past the bound, discarded.
    pub(crate) dropped: u64,
}

/// Splits a byte stream into lines of at most `max` bytes kept; the rest of
/// a longer line is counted, not kept, so memory stays bounded by `max`.
#[derive(Debug)]
pub(crate) struct BoundedLines {
    line: Vec<u8>,
    dropped: u64,
    max: usize,
}

impl BoundedLines {
    /// A splitter keeping `max` bytes of each line.
    pub(crate) fn new(max: usize) -> BoundedLines {
        BoundedLines {
            line: Vec::new(),
            dropped: 0,
            max,
        }
    }

    /// Takes bytes from the front of `buf`: how many it used, and the line
    /// they completed, if any (then the caller feeds the rest again).
    pub(crate) fn feed(&mut self, buf: &[u8]) -> (usize, Option<Line>) {
        let (chunk, complete) = match buf.iter().position(|b| *b == b'\n') {
            Some(end) => (&buf[..end], true),
            None => (buf, false),
        };
        let room = self.max.saturating_sub(self.line.len()).min(chunk.len());
        self.line.extend_from_slice(&chunk[..room]);
        self.dropped += (chunk.len() - room) as u64;
        if complete {
            (chunk.len() + 1, self.take())
        } else {
            (chunk.len(), None)
        }
    }

    /// The unterminated last line, at the end of the stream.
    pub(crate) fn finish(&mut self) -> Option<Line> {
        if self.line.is_empty() && self.dropped == 0 {
            return None;
        }
        self.take()
    }

    fn take(&mut self) -> Option<Line> {
        let mut text = std::mem::take(&mut self.line);
        if text.last() == Some(&b'\r') {
            text.pop();
        }
        let dropped = std::mem::take(&mut self.dropped);
        Some(Line { text, dropped })
    }
}

/// Per-child stderr rate limit: a one-second window of `STDERR_LINES_PER_SECOND` lines.
#[derive(Debug)]
pub(crate) struct LogBudget {
    window: Instant,
    logged: u32,
    suppressed: u64,
}

/// Whether one line may be logged.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Log it; `suppressed` lines were dropped since the last one logged.
    Log {
        /// Lines not logged before this one.
        suppressed: u64,
    },
    /// Over the budget: drop it.
    Suppress,
}

impl LogBudget {
    /// A budget whose first window starts at `now`.
    pub(crate) fn new(now: Instant) -> LogBudget {
        LogBudget {
            window: now,
            logged: 0,
            suppressed: 0,
        }
    }

    /// Whether a line arriving at `now` may be logged.
    pub(crate) fn admit(&mut self, now: Instant) -> Admit {
        if now.duration_since(self.window) >= Duration::from_secs(1) {
            self.window = now;
            self.logged = 0;
        }
        if self.logged >= STDERR_LINES_PER_SECOND {
            self.suppressed += 1;
            return Admit::Suppress;
        }
        self.logged += 1;
        Admit::Log {
            suppressed: std::mem::take(&mut self.suppressed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(inherit: Option<&[&str]>, env: &[(&str, &str)]) -> StdioConfig {
        let mut config = StdioConfig::from_command(vec!["x".into()]);
        config.inherit_env = inherit.map(|list| list.iter().map(|s| (*s).to_owned()).collect());
        config.env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        config
    }

    fn vars(names: &[&str]) -> Vec<(String, String)> {
        names.iter().map(|n| ((*n).to_owned(), format!("v-{n}"))).collect()
    }

    #[test]
    fn only_allowlisted_variables_reach_a_child() {
        let inherited = vars(&[
            "PATH",
            "HOME",
            "LC_ALL",
            "ERAGATE_SESSION_KEY",
            "CI_TOKEN",
            "AWS_SECRET",
        ]);
        let env = child_env(&config(None, &[("EXTRA", "1")]), &[], inherited);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["EXTRA", "HOME", "LC_ALL", "PATH"]);
    }

    #[test]
    fn patterns_never_match_eragate_or_protected_names_but_exact_names_do() {
        let inherited = vars(&["ERAGATE_SESSION_KEY", "ERAGATE_LOG", "CI_TOKEN", "CI_URL", "NPM_X"]);
        let protected = ["CI_TOKEN".to_owned()];
        let env = child_env(&config(Some(&["*", "NPM_X"]), &[]), &protected, inherited.clone());
        assert_eq!(env.keys().collect::<Vec<_>>(), ["CI_URL", "NPM_X"]);
        let env = child_env(&config(Some(&["ERAGATE_LOG", "CI_TOKEN"]), &[]), &protected, inherited);
        assert_eq!(env.keys().collect::<Vec<_>>(), ["CI_TOKEN", "ERAGATE_LOG"]);
    }

    #[test]
    fn configured_env_wins_over_inherited() {
        let env = child_env(&config(None, &[("HOME", "/srv")]), &[], vars(&["HOME"]));
        assert_eq!(env["HOME"], "/srv");
    }

    #[test]
    fn long_lines_are_cut_and_counted_not_kept() {
        let mut lines = BoundedLines::new(4);
        let mut stream: &[u8] = b"abcdefgh\nxy\r\ntail";
        let mut out = Vec::new();
        while !stream.is_empty() {
            let (used, line) = lines.feed(&stream[..stream.len().min(3)]);
            stream = &stream[used..];
            out.extend(line);
            assert!(lines.line.len() <= 4);
        }
        out.extend(lines.finish());
        let expected = [(&b"abcd"[..], 4), (b"xy", 0), (b"tail", 0)];
        let got: Vec<(&[u8], u64)> = out.iter().map(|l| (&l.text[..], l.dropped)).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn the_budget_suppresses_past_its_rate_and_reports_the_count() {
        let start = Instant::now();
        let mut budget = LogBudget::new(start);
        for _ in 0..STDERR_LINES_PER_SECOND {
            assert_eq!(budget.admit(start), Admit::Log { suppressed: 0 });
        }
        assert_eq!(budget.admit(start), Admit::Suppress);
        assert_eq!(budget.admit(start), Admit::Suppress);
        let later = start + Duration::from_secs(1);
        assert_eq!(budget.admit(later), Admit::Log { suppressed: 2 });
    }

    #[test]
    fn programs_resolve_on_the_given_path() {
        assert_eq!(
            resolve("sh", Some("/nonexistent:/bin:/usr/bin"), None).map(|p| p.is_absolute()),
            Some(true)
        );
        assert_eq!(resolve("sh", Some("/nonexistent"), None), None);
        assert_eq!(resolve("sh", None, None), None);
        assert_eq!(resolve("/bin/sh", None, None), Some(PathBuf::from("/bin/sh")));
    }
}
