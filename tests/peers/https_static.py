#!/usr/bin/env python3
"""Serves the files of a directory over HTTPS on 127.0.0.1 (client metadata documents for
eragate's built-in authorization server), with a certificate the test made from its own CA.
Each request is logged on stdout as `https_static: METHOD PATH Host: HOST`.

    https_static.py --port P --dir D --cert CERT.pem --key KEY.pem [--cache-control VALUE]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import ssl


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--cache-control", default=None)
    args = ap.parse_args()

    class Handler(http.server.SimpleHTTPRequestHandler):
        extensions_map = {".json": "application/json", "": "application/octet-stream"}

        def end_headers(self) -> None:
            if args.cache_control:
                self.send_header("Cache-Control", args.cache_control)
            super().end_headers()

        def log_message(self, format: str, *a) -> None:  # noqa: A002 - the base class's name
            print(f"https_static: {self.command} {self.path} Host: {self.headers.get('Host')}", flush=True)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), functools.partial(Handler, directory=args.dir))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
