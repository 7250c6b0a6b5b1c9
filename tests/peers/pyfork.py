#!/usr/bin/env python3
"""Starts the Python peers in milliseconds rather than a second: a fork server for the tests.

Importing the Python SDK costs about a second of CPU per process (pydantic builds its models),
and the integration tests start Python peers over a thousand times. The zygote imports what
the peers import once, then forks one child per start; the child runs the peer unchanged, on
the caller's own stdin, stdout and stderr, in the caller's working directory and environment.

    pyfork.py serve SOCKET     the zygote: prints {"ready": SOCKET} once it listens; exits, with
                               every child it started, when its stdin closes
    launcher                   an executable file the tests write (see `launcher_source`) that
                               takes the interpreter's own command line (`SCRIPT ARGS..` or
                               `-c CODE ARGS..`) and hands it to the zygote

The launcher is what its caller sees as the process: a signal it gets (TERM, INT, HUP, QUIT,
USR1, USR2) goes on to the child, it exits with the child's status (killed by the child's
signal), and when it is killed the child is killed too. Once the child runs, the launcher holds
none of the caller's pipes, so the caller sees end-of-file exactly when the child closes them.
Any command line the zygote cannot take (interpreter options, no script), a socket that cannot
be reached or another user's launcher: the launcher execs the real interpreter instead.
"""

import json
import os
import signal
import socket
import sys

FORWARDED_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
MAX_REQUEST = 1 << 20


def launcher_source(python, socket_path):
    """The text of a launcher for `socket_path` (the tests write it, mode 0755)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return (
        f"#!{python} -S\n"
        f"import sys\nsys.path.insert(0, {here!r})\n"
        f"import pyfork\npyfork.launch({python!r}, {socket_path!r})\n"
    )


# ---- the launcher -------------------------------------------------------------------------


def launch(python, socket_path):
    args = sys.argv[1:]
    if not forkable(args):
        exec_python(python, args)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(socket_path)
        request = {"argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}
        socket.send_fds(sock, [json.dumps(request).encode()], [0, 1, 2])
        started = json.loads(sock.recv(4096) or b"{}")
    except (OSError, ValueError):
        started = {}
    if "pid" not in started:
        exec_python(python, args)
    # The caller's pipes are the child's now.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)

    def forward(signum, _frame):
        try:
            sock.send(json.dumps({"signal": signum}).encode())
        except OSError:
            pass

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    while True:
        try:
            message = sock.recv(4096)
        except OSError:
            message = b""
        if not message:
            os._exit(1)
        ended = json.loads(message)
        if "exit" in ended:
            os._exit(ended["exit"])
        if "killed" in ended:
            if ended["killed"] in FORWARDED_SIGNALS:
                signal.signal(ended["killed"], signal.SIG_DFL)
            os.kill(os.getpid(), ended["killed"])
            os._exit(128 + ended["killed"])


# `-X` options that change how the interpreter runs: a command line with one is not forked.
# Any other (`-X tag`, which tests use to find a process) is only seen in `sys._xoptions`.
INTERPRETER_XOPTIONS = {
    "cpu_count", "dev", "faulthandler", "frozen_modules", "gil", "importtime",
    "int_max_str_digits", "no_debug_ranges", "perf", "presite", "pycache_prefix",
    "showrefcount", "tracemalloc", "utf8", "warn_default_encoding",
}


def parse(args):
    """`(xoptions, rest)` for a command line the zygote can run (`rest`: `SCRIPT ARGS..` or
    `-c CODE ARGS..`), else None."""
    xoptions = {}
    while args and args[0].startswith("-X"):
        value = args[0][2:] or (args[1] if len(args) > 1 else "")
        args = args[1:] if args[0][2:] else args[2:]
        name, _, setting = value.partition("=")
        if not name or name in INTERPRETER_XOPTIONS:
            return None
        xoptions[name] = setting or True
    if not args:
        return None
    if args[0] == "-c":
        return (xoptions, args) if len(args) >= 2 else None
    if args[0].startswith("-") or not os.path.isfile(args[0]):
        return None
    return xoptions, args


def forkable(args):
    return parse(args) is not None


def exec_python(python, args):
    os.execv(python, [python, *args])


# ---- the zygote ---------------------------------------------------------------------------


def serve(socket_path):
    preload()
    import selectors

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(socket_path)
    os.chmod(socket_path, 0o600)
    listener.listen(128)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    os.set_blocking(wake_read, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listener")
    selector.register(0, selectors.EVENT_READ, "stdin")
    selector.register(wake_read, selectors.EVENT_READ, "wake")
    zygote = Zygote(listener, selector, (wake_read, wake_write))
    print(json.dumps({"ready": socket_path}), flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "listener":
                zygote.accept()
            elif key.data == "stdin":
                if not os.read(0, 4096):
                    zygote.stop()
                    remove_folder(socket_path)
                    return
            elif key.data == "wake":
                try:
                    while os.read(wake_read, 4096):
                        pass
                except BlockingIOError:
                    pass
                zygote.reap()
            else:
                zygote.read(key.fileobj)


def remove_folder(socket_path):
    """Removes the socket, and its folder with the launcher when the tests made it for us."""
    import shutil

    folder = os.path.dirname(socket_path)
    if os.path.basename(folder).startswith("eragate-pyfork-"):
        shutil.rmtree(folder, ignore_errors=True)
    else:
        os.unlink(socket_path)


class Zygote:
    def __init__(self, listener, selector, wake_fds):
        self.listener = listener
        self.selector = selector
        self.wake_fds = wake_fds
        self.child_of = {}  # connection -> pid, once started
        self.connection_of = {}  # pid -> connection, while the launcher lives

    def accept(self):
        connection, _ = self.listener.accept()
        uid = socket_peer_uid(connection)
        if uid != os.getuid():
            connection.close()
            return
        self.selector.register(connection, 1, "launcher")

    def read(self, connection):
        pid = self.child_of.get(connection)
        if pid is None:
            self.start(connection)
            return
        try:
            message = connection.recv(4096)
        except OSError:
            message = b""
        if not message:
            self.drop(connection)
            if self.connection_of.pop(pid, None) is not None:
                kill(pid, signal.SIGKILL)
            return
        try:
            kill(pid, int(json.loads(message)["signal"]))
        except (ValueError, KeyError, TypeError):
            pass

    def start(self, connection):
        try:
            message, fds, _, _ = socket.recv_fds(connection, MAX_REQUEST, 3)
        except OSError:
            message, fds = b"", []
        try:
            request = json.loads(message)
            command, cwd, env = parse_request(request["argv"]), request["cwd"], request["env"]
        except (ValueError, KeyError, TypeError):
            command = None
        if command is None or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            self.drop(connection)
            return
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                self.become_child(fds)
                code = run_peer(*command, cwd, env)
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        self.child_of[connection] = pid
        self.connection_of[pid] = connection
        try:
            connection.send(json.dumps({"pid": pid}).encode())
        except OSError:
            pass

    def become_child(self, fds):
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.listener.close()
        # Every launcher's connection, started or not, is registered with the selector.
        for key in list(self.selector.get_map().values()):
            if key.data == "launcher":
                key.fileobj.close()
        self.selector.close()
        for fd in self.wake_fds:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.connection_of.pop(pid, None)
            if connection is None:
                continue
            if os.WIFSIGNALED(status):
                ended = {"killed": os.WTERMSIG(status)}
            else:
                ended = {"exit": os.waitstatus_to_exitcode(status)}
            try:
                connection.send(json.dumps(ended).encode())
            except OSError:
                pass
            self.drop(connection)

    def drop(self, connection):
        self.child_of.pop(connection, None)
        try:
            self.selector.unregister(connection)
        except (KeyError, ValueError):
            pass
        connection.close()

    def stop(self):
        for pid in list(self.connection_of):
            kill(pid, signal.SIGKILL)
        self.listener.close()


def parse_request(argv):
    """`parse` for a command line received as JSON: None unless it is a list of strings."""
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        return None
    return parse(argv)


def socket_peer_uid(connection):
    import struct

    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return uid


def kill(pid, signum):
    try:
        os.kill(pid, signum)
    except OSError:
        pass


def run_peer(xoptions, argv, cwd, env):
    """Runs a parsed peer command line in this (forked) process as `python ARGV` would, with
    `xoptions` as its `-X` options; its exit code."""
    import atexit
    import runpy
    import threading
    import traceback
    import types

    code = 0
    try:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys._xoptions.clear()
        sys._xoptions.update(xoptions)
        if argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[0] = ""
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exit:
        code = exit_code(exit.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def exit_code(value):
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def preload():
    """Imports every module the peers in this folder import (at any depth), and the SDK whole."""
    import ast
    import contextlib
    import importlib
    import warnings

    here = os.path.dirname(os.path.abspath(__file__))
    local = {name[:-3] for name in os.listdir(here) if name.endswith(".py")}
    names = set()
    for file in sorted(os.listdir(here)):
        if not file.endswith(".py") or file == "pyfork.py":
            continue
        with open(os.path.join(here, file), encoding="utf-8") as source:
            tree = ast.parse(source.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    # What a module prints while it is imported is not the ready line.
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        for name in sorted(names):
            if name.split(".")[0] in local or name == "__future__":
                continue
            try:
                importlib.import_module(name)
            except (Exception, SystemExit):
                pass
        for package in ("mcp", "mcp_types", "uvicorn", "starlette", "sse_starlette"):
            import_tree(package)


def import_tree(name):
    """Imports `name` and, when it is a package, its modules at every depth (a command-line
    interface, which may exit when its extras are missing, is left out)."""
    import importlib
    import pkgutil

    if name.rsplit(".", 1)[-1] in ("cli", "__main__"):
        return
    try:
        module = importlib.import_module(name)
    except (Exception, SystemExit):
        return
    for info in pkgutil.iter_modules(getattr(module, "__path__", []), name + "."):
        import_tree(info.name)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "launcher":
        sys.stdout.write(launcher_source(sys.argv[2], sys.argv[3]))
    else:
        sys.exit("usage: pyfork.py serve SOCKET | pyfork.py launcher PYTHON SOCKET")
