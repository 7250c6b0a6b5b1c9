"""The conformance suite's client-credentials scenario (`auth/client-credentials-basic`)
played by eragate as the OAuth client of a protected upstream.

The suite runs this script as its "client" with the URL of an MCP server it protects with its
own authorization server, and passes the client's credentials in MCP_CONFORMANCE_CONTEXT
(`client_id`, `client_secret`). The script finds the authorization server the way eragate's
users do (the server's RFC 9728 metadata), writes an eragate configuration with
`[upstreams.credentials] kind = "client_credentials"`, starts eragate ($ERAGATE_BIN) in front
of the server, sends a 2026-07-28 `tools/list` and a legacy session's `tools/list` through it
and exits 0 when both are answered. The suite judges the token request eragate made.

Usage: python cc_conformance_client.py SERVER_URL   (ERAGATE_BIN names the binary)
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request


def fetch_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def issuer_of(server_url: str) -> str:
    parts = urllib.parse.urlsplit(server_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    for path in (f"/.well-known/oauth-protected-resource{parts.path}", "/.well-known/oauth-protected-resource"):
        try:
            return fetch_json(origin + path)["authorization_servers"][0]
        except Exception:  # noqa: BLE001 - try the next well-known location
            continue
    raise SystemExit(f"no protected resource metadata for {server_url}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, headers: dict) -> tuple[int, dict, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Accept", "application/json, text/event-stream")
    for name, value in headers.items():
        request.add_header(name, value)
    with urllib.request.urlopen(request, timeout=20) as response:
        text = response.read().decode()
        if text.lstrip().startswith("{"):
            message = json.loads(text)
        else:  # an SSE answer: its last data line
            data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
            message = json.loads(data[-1])
        return response.status, dict(response.headers), message


def main() -> None:
    server_url = sys.argv[-1]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT", "{}"))
    issuer = issuer_of(server_url)
    port = free_port()
    config = f"""
[listen]
address = "127.0.0.1:{port}"

[[upstreams]]
name = "conformance"
[upstreams.http]
url = "{server_url}"
[upstreams.credentials]
kind = "client_credentials"
issuer = "{issuer}"
client_id = "{context["client_id"]}"
client_secret_env = "CONFORMANCE_CLIENT_SECRET"
"""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(config)
    env = dict(os.environ, CONFORMANCE_CLIENT_SECRET=context["client_secret"], ERAGATE_LOG="info")
    gateway = subprocess.Popen([os.environ["ERAGATE_BIN"], "run", "--config", f.name], env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=1) as r:
                    if r.status == 200:
                        break
            except Exception:  # noqa: BLE001 - not ready yet
                time.sleep(0.05)
        mcp = base + "/mcp"
        modern = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "cc-conformance", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}}
        status, _, answer = post(mcp, {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                       "params": {"_meta": meta}}, modern)
        assert status == 200 and "result" in answer, answer
        status, headers, answer = post(mcp, {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "cc-conformance", "version": "0"}}}, {})
        assert status == 200 and "result" in answer, answer
        session = {"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        status, _, answer = post(mcp, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, session)
        assert status == 200 and "result" in answer, answer
        print("eragate answered through the protected server", file=sys.stderr)
    finally:
        gateway.terminate()
        gateway.wait(timeout=10)
        os.unlink(f.name)


if __name__ == "__main__":
    main()
