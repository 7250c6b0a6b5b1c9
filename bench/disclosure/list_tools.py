#!/usr/bin/env python3
"""Start each benchmark server (bench/disclosure/servers.json) over stdio, list its tools live,
and write the catalogue the evaluator ranks: {"servers": [{"name", "serverInfo", "tools"}]}.

A tiny JSON-RPC client on the standard library only: initialize, notifications/initialized,
then tools/list page by page. Servers get dummy tokens and a scratch folder; listing tools
calls no API. Usage: list_tools.py [--out FILE]  (default <cache>/catalogue.json)
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CACHE = os.environ.get("ERAGATE_DISCLOSURE", os.path.join(REPO, ".cache", "disclosure"))
PROTOCOL = "2025-06-18"
TIMEOUT = 60.0


class Peer:
    """One server child: writes requests, reads one JSON message per line."""

    def __init__(self, argv, env, cwd):
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd=cwd, text=True, bufsize=1,
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + TIMEOUT
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{method}: no answer in {TIMEOUT:.0f} s")
            line = self.lines.get(timeout=left)
            if line is None:
                raise EOFError(f"{method}: the server exited ({self.proc.poll()})")
            line = line.strip()
            if not line.startswith("{"):
                continue  # a server's stray log line on stdout
            message = json.loads(line)
            if message.get("id") != rid or "method" in message:
                continue  # a notification, or a request of the server's: not ours
            if "error" in message:
                raise RuntimeError(f"{method}: {message['error']}")
            return message["result"]

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def expand(text, scratch):
    return text.replace("{cache}", CACHE).replace("{scratch}", scratch)


def list_server(server, scratch):
    argv = [expand(a, scratch) for a in server["command"]]
    env = dict(os.environ)
    env.update({k: expand(v, scratch) for k, v in server.get("env", {}).items()})
    peer = Peer(argv, env, scratch)
    try:
        init = peer.request("initialize", {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "eragate-disclosure-bench", "version": "0"},
        })
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools, cursor = [], None
        while True:
            page = peer.request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(page.get("tools", []))
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return {"name": server["name"], "serverInfo": init.get("serverInfo"), "tools": tools}
    finally:
        peer.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(CACHE, "catalogue.json"))
    args = parser.parse_args()
    with open(os.path.join(HERE, "servers.json")) as f:
        servers = json.load(f)["servers"]
    listed, failed = [], []
    with tempfile.TemporaryDirectory(prefix="disclosure-") as scratch:
        for server in servers:
            try:
                entry = list_server(server, scratch)
            except Exception as e:  # a server that fails is reported, the others still count
                failed.append(server["name"])
                print(f"{server['name']:<12} FAILED: {e}", file=sys.stderr)
                continue
            listed.append(entry)
            print(f"{server['name']:<12} {len(entry['tools']):>3} tools", file=sys.stderr)
    total = sum(len(s["tools"]) for s in listed)
    with open(args.out, "w") as f:
        json.dump({"servers": listed}, f, indent=1)
    print(f"{total} tools from {len(listed)} servers -> {args.out}", file=sys.stderr)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
