#!/usr/bin/env python3
"""A small OTLP/HTTP trace receiver: decodes every POST /v1/traces body
(application/x-protobuf) as an ExportTraceServiceRequest with the official
`opentelemetry-proto` package, and serves what it received as JSON on GET /spans:

    [{"name", "trace_id", "span_id", "parent_span_id", "kind", "service",
      "attributes": {key: value}, "status": <code>,
      "resource": {key: value}, "headers": {lowercase name: value}}, ...]

    otlp_receiver.py PORT      (binds 127.0.0.1:PORT, 0 for a free one; then prints
                                {"listening": "http://127.0.0.1:PORT", "port": PORT})
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS = []
LOCK = threading.Lock()


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes(items):
    return {item.key: value_of(item.value) for item in items}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except Exception as error:  # not an ExportTraceServiceRequest: the test sees a 400
            self.send_error(400, str(error))
            return
        received = []
        headers = {name.lower(): value for name, value in self.headers.items()}
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            service = resource.get("service.name")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append({
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "kind": span.kind,
                        "service": service,
                        "attributes": attributes(span.attributes),
                        "status": span.status.code,
                        "resource": resource,
                        "headers": headers,
                    })
        with LOCK:
            SPANS.extend(received)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self):
        if self.path != "/spans":
            self.send_error(404)
            return
        with LOCK:
            body = json.dumps(SPANS).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    port = server.server_address[1]
    print(json.dumps({"listening": f"http://127.0.0.1:{port}", "port": port}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
