//! The Python peers' fork server (`tests/peers/pyfork.py`): one zygote per test process
//! imports the Python SDK once, and every Python peer a test starts is forked from it through
//! a launcher file that takes the interpreter's own command line. Starting a peer then costs
//! milliseconds of CPU instead of a second, and the peer itself runs unchanged.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;

/// A running zygote. Never dropped: when the test process ends its stdin closes, and the
/// zygote kills the children it started and removes its folder.
struct Zygote {
    launcher: String,
    _stdin: ChildStdin,
    _process: Child,
}

/// The launcher to use in place of `python`, or `None` (use `python` itself) when
/// `ERAGATE_TEST_PYFORK=0` or the zygote cannot start.
pub fn launcher(python: &str, script: &str) -> Option<&'static str> {
    static ZYGOTE: OnceLock<Option<Zygote>> = OnceLock::new();
    ZYGOTE
        .get_or_init(|| {
            if std::env::var("ERAGATE_TEST_PYFORK").is_ok_and(|v| v == "0") {
                return None;
            }
            start(python, script)
                .inspect_err(|e| eprintln!("pyfork: starting every Python peer in full: {e}"))
                .ok()
        })
        .as_ref()
        .map(|zygote| zygote.launcher.as_str())
}

fn start(python: &str, script: &str) -> Result<Zygote, String> {
    let dir = std::env::temp_dir().join(format!("eragate-pyfork-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    let socket = dir.join("zygote.sock");
    let launcher = dir.join("python");
    let source = Command::new(python)
        .args([script, "launcher", python])
        .arg(&socket)
        .output()
        .map_err(|e| format!("{script} launcher: {e}"))?;
    if !source.status.success() {
        return Err(format!("{script} launcher: {}", source.status));
    }
    std::fs::write(&launcher, &source.stdout).map_err(|e| e.to_string())?;
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    let mut process = Command::new(python)
        .args([script, "serve"])
        .arg(&socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("{script} serve: {e}"))?;
    let stdin = process.stdin.take().ok_or("no stdin")?;
    let stdout = process.stdout.take().ok_or("no stdout")?;
    let mut ready = String::new();
    BufReader::new(stdout)
        .read_line(&mut ready)
        .map_err(|e| e.to_string())?;
    if !ready.contains("\"ready\"") {
        let _ = process.kill();
        return Err(format!("{script} serve printed {ready:?}"));
    }
    Ok(Zygote {
        launcher: path_text(launcher)?,
        _stdin: stdin,
        _process: process,
    })
}

fn path_text(path: PathBuf) -> Result<String, String> {
    path.into_os_string()
        .into_string()
        .map_err(|p| format!("not UTF-8: {p:?}"))
}

/// What the tests rely on when a peer is forked: its command line, streams and exit status
/// are its own, a signal to the launcher reaches it, and killing the launcher kills it.
#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use nix::sys::signal::Signal;

    use crate::common::{peers, poll_until, signal};

    /// The forked peer's pid, from its first line, and the launcher.
    fn start_sleeper() -> (u32, std::process::Child) {
        let code = "import os, sys, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)";
        let mut launcher = Command::new(peers().python())
            .args(["-c", code])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the launcher");
        let mut line = String::new();
        BufReader::new(launcher.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the pid line");
        let pid = line.trim().parse().expect("a pid");
        (pid, launcher)
    }

    fn gone(pid: u32) -> bool {
        poll_until(Duration::from_secs(5), || {
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
        })
    }

    #[test]
    fn a_forked_peer_has_its_own_arguments_streams_and_exit_code() {
        let code = "import sys\nline = sys.stdin.readline()\n\
                    print(sys.argv[1:], line.upper().strip(), sys._xoptions, flush=True)\nsys.exit(7)";
        let mut launcher = Command::new(peers().python())
            .args(["-X", "marker", "-c", code, "one", "two"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the launcher");
        launcher
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"hello\n")
            .expect("write");
        let output = launcher.wait_with_output().expect("wait");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "['one', 'two'] HELLO {'marker': True}\n"
        );
        assert_eq!(output.status.code(), Some(7));
    }

    #[test]
    fn a_signal_to_the_launcher_reaches_the_peer() {
        let (pid, mut launcher) = start_sleeper();
        signal(launcher.id(), Signal::SIGTERM);
        let status = launcher.wait().expect("wait");
        assert_eq!(status.signal(), Some(Signal::SIGTERM as i32));
        assert!(gone(pid), "peer {pid} outlived its launcher");
    }

    #[test]
    fn killing_the_launcher_kills_the_peer() {
        let (pid, mut launcher) = start_sleeper();
        launcher.kill().expect("kill");
        let _ = launcher.wait();
        assert!(gone(pid), "peer {pid} outlived its launcher");
    }
}
