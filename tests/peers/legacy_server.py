#!/usr/bin/env python3
"""Legacy-only (handshake era) MCP test server on the Python SDK `mcp` 2.3.0 low-level API.

It speaks only the `initialize` handshake revisions (2024-11-05 .. 2025-11-25) and refuses
2026-07-28 stateless requests, so it stands in for a "real legacy upstream" behind eragate.

    legacy_server.py stdio
    legacy_server.py http --port N [--json-response]   # Streamable HTTP on 127.0.0.1:N/mcp
    legacy_server.py sse  --port N                     # old HTTP+SSE: GET /sse, POST /messages/?session_id=..
    (http and sse also take --trace: one stderr line per HTTP request with headers and body)
    (stdio and http also take --dual-era: a REFERENCE mode that is not legacy-only; the SDK's
     default dual-era serving, so the same fixture also answers 2026-07-28 requests)

--port 0 picks a free port. The HTTP modes print one line to stdout once listening:
    {"listening": "http://127.0.0.1:PORT/mcp", "port": PORT}    (".../sse" in sse mode)

How it is kept legacy-only (the SDK's defaults are dual-era):
  * stdio and sse drive the low-level server with `mcp.server.runner.serve_loop`, the
    handshake-only loop, instead of `Server.run()` (which is `serve_dual_era_loop`); a
    request before `initialize` gets -32602 from the loop's init gate.
  * Streamable HTTP uses `Server.streamable_http_app()`, whose session manager routes any
    request whose MCP-Protocol-Version header is not a handshake revision to the modern
    entry; the ASGI wrapper below answers those with HTTP 400 first.
  * The default `server/discover` handler is removed, so `server/discover` is -32601.

Fixture surface:
  tools      echo{text} -> "echo: <text>"; add{a,b} -> "<sum>" + structuredContent {sum};
             slow_progress{steps} -> progress per step (if a progressToken was given), "done";
             log_message{level?,message?} -> notifications/message at `level`, filtered by
             logging/setLevel, then "logged <level>" or "suppressed <level>";
             hang{} -> never returns (until cancelled); fail{} -> isError true;
             météo{city} -> "météo: <city>"
  resources  test://static/hello ("hello world"); template test://items/{id} ("item <id>");
             unknown URI -> JSON-RPC error -32002 with data {"uri": ...}
  prompts    greet{name} -> "Hello, <name>!"
  completion greet/name -> values of ["alice","bob","carol"] starting with the prefix
  logging    logging/setLevel per connection (default: everything is sent)
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from mcp.server.lowlevel import Server
from mcp.server.runner import serve_loop
from mcp.shared.exceptions import MCPError

SERVER_NAME = "eragate-legacy-fixture"
SERVER_VERSION = "1.0.0"
RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602

LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
COMPLETION_NAMES = ["alice", "bob", "carol"]
ITEM_RE = re.compile(r"^test://items/([^/?#]+)$")

TOOLS = [
    types.Tool(
        name="echo",
        description="Echo the text back as 'echo: <text>'",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    ),
    types.Tool(
        name="add",
        description="Add two integers",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        output_schema={
            "type": "object",
            "properties": {"sum": {"type": "integer"}},
            "required": ["sum"],
        },
    ),
    types.Tool(
        name="slow_progress",
        description="Send notifications/progress for each step (needs a progressToken), then return 'done'",
        input_schema={
            "type": "object",
            "properties": {"steps": {"type": "integer", "minimum": 0}},
            "required": ["steps"],
        },
    ),
    types.Tool(
        name="log_message",
        description="Send notifications/message at the given level (honours logging/setLevel)",
        input_schema={
            "type": "object",
            "properties": {
                "level": {"type": "string", "enum": LOG_LEVELS},
                "message": {"type": "string"},
            },
        },
    ),
    types.Tool(
        name="hang",
        description="Never returns until cancelled",
        input_schema={"type": "object", "properties": {}},
    ),
    types.Tool(
        name="fail",
        description="Always returns a tool error (isError true)",
        input_schema={"type": "object", "properties": {}},
    ),
    types.Tool(
        name="météo",
        description="Unicode-named tool: echoes the city as 'météo: <city>'",
        input_schema={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    ),
]


def _text(text: str) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=text)]


def _conn_state(ctx: Any) -> dict[str, Any]:
    """Per-connection scratch dict (Connection.state); one per stdio process / HTTP session / SSE stream."""
    conn = getattr(ctx.session, "_connection", None)
    return conn.state if conn is not None else {}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    name = params.name
    if name == "echo":
        return types.CallToolResult(content=_text(f"echo: {args.get('text', '')}"))
    if name == "add":
        try:
            a, b = int(args["a"]), int(args["b"])
        except (KeyError, TypeError, ValueError):
            return types.CallToolResult(content=_text("add needs integer a and b"), is_error=True)
        return types.CallToolResult(content=_text(str(a + b)), structured_content={"sum": a + b})
    if name == "slow_progress":
        steps = int(args.get("steps", 3))
        for i in range(steps):
            await anyio.sleep(0.05)
            # No-op when the request carried no progressToken.
            await ctx.session.report_progress(i + 1, steps, f"step {i + 1}/{steps}")
        return types.CallToolResult(content=_text("done"))
    if name == "log_message":
        level = args.get("level", "info")
        if level not in LOG_LEVELS:
            return types.CallToolResult(content=_text(f"unknown level {level!r}"), is_error=True)
        message = args.get("message", f"log at {level}")
        threshold = _conn_state(ctx).get("log_level")
        if threshold is not None and LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return types.CallToolResult(content=_text(f"suppressed {level}"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await ctx.session.send_log_message(level, message, logger=SERVER_NAME, related_request_id=ctx.request_id)
        return types.CallToolResult(content=_text(f"logged {level}"))
    if name == "hang":
        await anyio.sleep_forever()
    if name == "fail":
        return types.CallToolResult(content=_text("failure requested"), is_error=True)
    if name == "météo":
        return types.CallToolResult(content=_text(f"météo: {args.get('city', '')}"))
    raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[types.Resource(uri="test://static/hello", name="hello", mime_type="text/plain")]
    )


async def list_resource_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[types.ResourceTemplate(uri_template="test://items/{id}", name="item", mime_type="text/plain")]
    )


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == "test://static/hello":
        text = "hello world"
    elif m := ITEM_RE.match(uri):
        text = f"item {m.group(1)}"
    else:
        # Legacy: -32002. 2026-07-28 (only reachable with --dual-era) retired it for -32602.
        code = INVALID_PARAMS if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else RESOURCE_NOT_FOUND
        raise MCPError(code, "Resource not found", data={"uri": uri})
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)])


async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(
        prompts=[
            types.Prompt(
                name="greet",
                description="Greets someone",
                arguments=[types.PromptArgument(name="name", description="Who to greet", required=True)],
            )
        ]
    )


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    if params.name != "greet":
        raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")
    who = (params.arguments or {}).get("name", "world")
    return types.GetPromptResult(
        description="A greeting",
        messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=f"Hello, {who}!"))],
    )


async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
    ref = params.ref
    values: list[str] = []
    if getattr(ref, "type", None) == "ref/prompt" and ref.name == "greet" and params.argument.name == "name":
        values = [v for v in COMPLETION_NAMES if v.startswith(params.argument.value)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


async def set_logging_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
    _conn_state(ctx)["log_level"] = params.level
    return types.EmptyResult()


def build_server(dual_era: bool = False) -> Server[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # on_set_logging_level is deprecated at 2026-07-28; we are legacy.
        server: Server[Any] = Server(
            SERVER_NAME,
            version=SERVER_VERSION,
            instructions="Legacy-only MCP test fixture for eragate.",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
            on_set_logging_level=set_logging_level,
        )
    if not dual_era:
        # A legacy server has no server/discover: answer it -32601 like any unknown method.
        server._request_handlers.pop("server/discover", None)  # noqa: SLF001
    return server


# --- transports -----------------------------------------------------------------------


async def run_stdio(server: Server[Any], dual_era: bool) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        if dual_era:
            await server.run(read_stream, write_stream, server.create_initialization_options())
            return
        async with server.lifespan(server) as lifespan_state:
            await serve_loop(server, read_stream, write_stream, lifespan_state=lifespan_state)


class TraceHTTP:
    """ASGI wrapper for --trace: one stderr line per HTTP request (method, path, headers, body) and its status."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        body = b""
        pending: list[Any] = []
        if scope["method"] in ("POST", "PUT", "PATCH"):
            while True:  # buffer the body so it is logged even if the app never reads it
                msg = await receive()
                pending.append(msg)
                if msg["type"] != "http.request":
                    break
                body += msg.get("body", b"")
                if not msg.get("more_body"):
                    break
        line = f"TRACE {scope['method']} {scope['path']} headers={json.dumps(headers)}"
        if body:
            line += f" body={body.decode('utf-8', 'replace')[:2000]}"
        print(line, file=sys.stderr, flush=True)

        async def replay_receive() -> Any:
            return pending.pop(0) if pending else await receive()

        async def traced_send(msg: Any) -> None:
            if msg["type"] == "http.response.start":
                print(f"TRACE -> {msg['status']} for {scope['method']} {scope['path']}", file=sys.stderr, flush=True)
            await send(msg)

        await self.app(scope, replay_receive, traced_send)


class LegacyOnlyHTTP:
    """ASGI wrapper: HTTP 400 for any request whose MCP-Protocol-Version is not a handshake revision."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            pv = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-protocol-version"), None)
            if pv is not None and pv not in HANDSHAKE_PROTOCOL_VERSIONS:
                body = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {
                            "code": -32000,
                            "message": f"Bad Request: Unsupported protocol version: {pv} "
                            f"(supported versions: {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})",
                        },
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def build_http_app(server: Server[Any], json_response: bool, dual_era: bool) -> Any:
    app = server.streamable_http_app(json_response=json_response, host="127.0.0.1")
    return app if dual_era else LegacyOnlyHTTP(app)


def build_sse_app(server: Server[Any]) -> Any:
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    from mcp.server.sse import SseServerTransport

    sse = SseServerTransport("/messages/")
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(_app: Any):
        async with server.lifespan(server) as lifespan_state:
            state["lifespan"] = lifespan_state
            yield

    async def handle_sse(request: Any) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read_stream, write_stream):  # noqa: SLF001
            await serve_loop(server, read_stream, write_stream, lifespan_state=state["lifespan"])
        return Response()

    return Starlette(
        routes=[Route("/sse", endpoint=handle_sse, methods=["GET"]), Mount("/messages/", app=sse.handle_post_message)],
        lifespan=lifespan,
    )


async def run_uvicorn(app: Any, port: int, path: str) -> None:
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)

    async def announce() -> None:
        while not userver.started:
            await anyio.sleep(0.01)
        bound = userver.servers[0].sockets[0].getsockname()[1]
        print(json.dumps({"listening": f"http://127.0.0.1:{bound}{path}", "port": bound}), flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await userver.serve()
        tg.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="transport", required=True)
    p_stdio = sub.add_parser("stdio", help="serve on stdin/stdout")
    p_http = sub.add_parser("http", help="Streamable HTTP on 127.0.0.1:PORT/mcp")
    p_http.add_argument("--port", type=int, required=True)
    p_http.add_argument("--json-response", action="store_true", help="answer POSTs with JSON instead of SSE")
    p_sse = sub.add_parser("sse", help="old HTTP+SSE transport: GET /sse, POST /messages/")
    p_sse.add_argument("--port", type=int, required=True)
    for p in (p_stdio, p_http):
        p.add_argument(
            "--dual-era",
            action="store_true",
            help="reference mode, NOT legacy-only: the SDK's default dual-era serving (also 2026-07-28)",
        )
    for p in (p_http, p_sse):
        p.add_argument("--trace", action="store_true", help="log every HTTP request (headers, body) to stderr")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    warnings.simplefilter("ignore", DeprecationWarning)
    dual_era = getattr(args, "dual_era", False)
    server = build_server(dual_era)
    try:
        if args.transport == "stdio":
            anyio.run(run_stdio, server, dual_era)
        elif args.transport == "http":
            app = build_http_app(server, args.json_response, dual_era)
            anyio.run(run_uvicorn, TraceHTTP(app) if args.trace else app, args.port, "/mcp")
        else:
            app = build_sse_app(server)
            anyio.run(run_uvicorn, TraceHTTP(app) if args.trace else app, args.port, "/sse")
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
