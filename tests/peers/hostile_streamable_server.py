#!/usr/bin/env python3
"""A hostile 2025-06-18 Streamable HTTP upstream: it answers every notification with a
stream it never ends.

    hostile_streamable_server.py --record FILE

Standard library only (it plays a misbehaving server, not an MCP SDK peer). Requests are
answered as a plain server would: `initialize` (with an `Mcp-Session-Id`), `tools/list`
(one tool, `echo`), `tools/call` of `echo` (its `text` back), anything else `-32601`.
A notification (or a response), which the transport answers `202 Accepted` with no body,
gets `200` with `content-type: text/event-stream` instead, and then a comment every 200 ms
until the reader goes away. The method of every notification is appended to FILE as one
JSON line {"notified": METHOD} before its stream opens. Once listening it prints
    {"listening": "http://127.0.0.1:PORT/mcp"}
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RECORD = "/dev/null"
REVISION = "2025-06-18"


def answer(request: dict) -> dict:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": REVISION,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile-streamable", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call" and params.get("name") == "echo":
        text = str((params.get("arguments") or {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": request.get("id"), "result": result}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        try:
            message = json.loads(self.rfile.read(length))
        except ValueError:
            self.send_error(400)
            return
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            self.endless_stream(message)
            return
        body = json.dumps(answer(message)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        if message.get("method") == "initialize":
            self.send_header("mcp-session-id", "hostile-1")
        self.end_headers()
        self.wfile.write(body)

    def endless_stream(self, message):
        method = message.get("method") if isinstance(message, dict) else None
        with open(RECORD, "a", encoding="utf-8") as record:
            record.write(json.dumps({"notified": method}) + "\n")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        self.close_connection = True
        try:
            while True:
                self.wfile.write(b": still here\n\n")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            return

    def do_GET(self):
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_DELETE(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()


def main() -> None:
    global RECORD
    if len(sys.argv) == 3 and sys.argv[1] == "--record":
        RECORD = sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"listening": f"http://127.0.0.1:{server.server_address[1]}/mcp"}), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
