#!/usr/bin/env python3
"""Drive an MCP server with the Python SDK client (`mcp` 2.3.0, `mcp.Client`) and print ONE JSON object.

    py_client.py --mode legacy|2026-07-28|auto (--url URL | --stdio "CMD ARGS" | --sse URL)
                 [--scenario NAME] [--profile fixture|everything] [--offer-version V]
                 [--header "Name: value"]... [--timeout SECONDS]

Output on stdout (exit 0):
    {"protocol_version": "<negotiated>", "server_info": {...}|null, "results": {"<step>": {...}, ...}}
On any failure: exit 1, the error on stderr, nothing on stdout.

Targets: --url is Streamable HTTP; --stdio is split with shlex and spawned with this process's
full environment (the SDK default would pass only a safe subset); --sse is the old HTTP+SSE
transport (URL of the GET /sse endpoint).

Modes (`mcp.Client(target, mode=...)`):
  legacy      initialize handshake; offers 2025-11-25 unless --offer-version.
  2026-07-28  no handshake, no probe: every request carries the 2026-07-28 `_meta` envelope
              (and on HTTP the MCP-Protocol-Version / Mcp-Method / Mcp-Name headers).
  auto        sends `server/discover` at 2026-07-28 first; on any JSON-RPC error (or an HTTP
              4xx the transport maps to one) it falls back to `initialize`.

--offer-version V (legacy and auto): the revision offered in `initialize`. The SDK has no
public knob: `ClientSession.initialize()` reads the module global
`mcp.client.session.LATEST_HANDSHAKE_VERSION` at call time (mcp 2.3.0,
mcp/client/session.py), so we rebind that global before connecting. The SDK accepts any
handshake revision the server answers (it raises only if the answer is not one of
2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25).

Scenarios (--profile picks the server's names: `fixture` = legacy_server.py, `everything` =
@modelcontextprotocol/server-everything):
  full       list_tools, call_echo, call_add, call_meteo (fixture only), list_resources,
             list_resource_templates, read_static, read_template, list_prompts, get_prompt,
             complete
  connect    nothing but the connection (protocol_version, server_info, capabilities); since
             mode 2026-07-28 connects without sending anything, there it sends server/discover
             (step `discover`: supported_versions, ttl_ms, cache_scope)
  tools | resources | prompts | complete   the matching subset of `full`
  progress   calls the progress tool with a progress callback; reports the progress values
  logging    (fixture) legacy: logging/setLevel warning, then log_message at info and error;
             2026-07-28: Client(log_level="warning") opt-in instead of setLevel
  errors     (fixture) fail tool (isError), unknown tool, unknown resource (code/data)
  burst      (fixture) echo called 5 times, then add once; each step's result or JSON-RPC
             error (code/message/data), so rate limits can be seen as the SDK sees them
  cancel     (fixture) call `hang` with a 1 s read timeout (the SDK then sends
             notifications/cancelled on legacy), then check the connection still works
  plan       the steps of --plan, a JSON list of [op, ...] with op one of list_tools,
             list_prompts, list_resources, list_resource_templates, call NAME ARGS,
             read URI, prompt NAME ARGS, complete PROMPT ARG PREFIX; results under "<i>:<op>",
             a JSON-RPC error as {"error": {...}} (names from any server, e.g. a federation's)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
import traceback
import warnings
from typing import Any

import mcp
import mcp.client.session as _mcp_client_session
import mcp_types as types
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

PROFILES: dict[str, dict[str, Any]] = {
    "fixture": {
        "echo": ("echo", {"text": "hi"}),
        "add": ("add", {"a": 2, "b": 3}),
        "meteo": ("météo", {"city": "Zürich"}),
        "static_uri": "test://static/hello",
        "template_uri": "test://items/42",
        "prompt": ("greet", {"name": "Ada"}),
        "complete": ("greet", "name", "a"),
        "progress": ("slow_progress", {"steps": 3}),
    },
    "everything": {
        "echo": ("echo", {"message": "hi"}),
        "add": ("get-sum", {"a": 2, "b": 3}),
        "meteo": None,
        "static_uri": "demo://resource/static/document/features.md",
        "template_uri": "demo://resource/dynamic/text/42",
        "prompt": ("args-prompt", {"city": "Ada"}),
        "complete": ("completable-prompt", "department", "E"),
        "progress": ("trigger-long-running-operation", {"duration": 0.3, "steps": 3}),
    },
}

SCENARIO_STEPS = {
    "full": [
        "list_tools",
        "call_echo",
        "call_add",
        "call_meteo",
        "list_resources",
        "list_resource_templates",
        "read_static",
        "read_template",
        "list_prompts",
        "get_prompt",
        "complete",
    ],
    "connect": [],
    "tools": ["list_tools", "call_echo", "call_add", "call_meteo"],
    "resources": ["list_resources", "list_resource_templates", "read_static", "read_template"],
    "prompts": ["list_prompts", "get_prompt"],
    "complete": ["complete"],
    "progress": ["progress"],
    "logging": ["logging"],
    "errors": ["call_fail", "call_unknown_tool", "read_unknown_resource"],
    "cancel": ["cancel"],
    "burst": ["burst"],
    "plan": [],
}

TEXT_LIMIT = 300


def dump(model: Any) -> Any:
    if model is None:
        return None
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def texts(content: list[Any]) -> list[str]:
    return [c.text for c in content if getattr(c, "type", None) == "text"]


def tool_summary(result: types.CallToolResult) -> dict[str, Any]:
    t = texts(result.content)
    out: dict[str, Any] = {"text": t[0] if t else None, "is_error": bool(result.is_error)}
    if len(t) > 1:
        out["texts"] = t
    if result.structured_content is not None:
        out["structured"] = result.structured_content
    return out


def error_summary(e: MCPError) -> dict[str, Any]:
    return {"error": {"code": e.code, "message": e.message, "data": e.data}}


def resource_summary(result: types.ReadResourceResult) -> dict[str, Any]:
    c = result.contents[0]
    text = getattr(c, "text", None)
    out: dict[str, Any] = {"uri": str(c.uri), "mime_type": c.mime_type, "count": len(result.contents)}
    if text is not None:
        out["text"] = text[:TEXT_LIMIT]
        out["length"] = len(text)
    return out


class Runner:
    def __init__(self, client: mcp.Client, profile: dict[str, Any], logs: list[dict[str, Any]]):
        self.c = client
        self.p = profile
        self.logs = logs

    async def step(self, name: str) -> dict[str, Any] | None:
        return await getattr(self, name)()

    async def discover(self) -> dict[str, Any]:
        # session.discover() would return the result synthesized at connect; send a real one.
        raw = await self.c.session.send_discover(self.c.protocol_version)
        r = types.DiscoverResult.model_validate(raw)
        return {"supported_versions": r.supported_versions, "ttl_ms": r.ttl_ms, "cache_scope": r.cache_scope}

    async def list_tools(self) -> dict[str, Any]:
        r = await self.c.list_tools()
        return {"names": [t.name for t in r.tools], "count": len(r.tools)}

    async def _call(self, key: str) -> dict[str, Any] | None:
        spec = self.p[key]
        if spec is None:
            return None
        name, args = spec
        return {"tool": name, **tool_summary(await self.c.call_tool(name, args))}

    async def call_echo(self) -> dict[str, Any] | None:
        return await self._call("echo")

    async def call_add(self) -> dict[str, Any] | None:
        return await self._call("add")

    async def call_meteo(self) -> dict[str, Any] | None:
        return await self._call("meteo")

    async def list_resources(self) -> dict[str, Any]:
        r = await self.c.list_resources()
        return {"uris": [str(x.uri) for x in r.resources], "names": [x.name for x in r.resources]}

    async def list_resource_templates(self) -> dict[str, Any]:
        r = await self.c.list_resource_templates()
        return {"uri_templates": [x.uri_template for x in r.resource_templates], "names": [x.name for x in r.resource_templates]}

    async def read_static(self) -> dict[str, Any]:
        return resource_summary(await self.c.read_resource(self.p["static_uri"]))

    async def read_template(self) -> dict[str, Any]:
        return resource_summary(await self.c.read_resource(self.p["template_uri"]))

    async def list_prompts(self) -> dict[str, Any]:
        r = await self.c.list_prompts()
        return {
            "names": [x.name for x in r.prompts],
            "arguments": {x.name: [a.name for a in (x.arguments or [])] for x in r.prompts},
        }

    async def get_prompt(self) -> dict[str, Any]:
        name, args = self.p["prompt"]
        r = await self.c.get_prompt(name, args)
        msg_texts = [m.content.text for m in r.messages if getattr(m.content, "type", None) == "text"]
        return {"prompt": name, "text": msg_texts[0] if msg_texts else None, "messages": len(r.messages)}

    async def complete(self) -> dict[str, Any]:
        prompt, arg, prefix = self.p["complete"]
        r = await self.c.complete(types.PromptReference(type="ref/prompt", name=prompt), {"name": arg, "value": prefix})
        return {"prompt": prompt, "argument": arg, "prefix": prefix, "values": r.completion.values}

    async def progress(self) -> dict[str, Any]:
        name, args = self.p["progress"]
        seen: list[dict[str, Any]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append({"progress": progress, "total": total, "message": message})

        r = await self.c.call_tool(name, args, progress_callback=on_progress)
        # Progress notifications and the result may race; give late ones a moment.
        await asyncio.sleep(0.05)
        return {"tool": name, **tool_summary(r), "progress": [s["progress"] for s in seen], "notifications": seen}

    async def logging(self) -> dict[str, Any]:
        legacy = self.c.protocol_version != "2026-07-28"
        if legacy:
            await self.c.set_logging_level("warning")
        out: dict[str, Any] = {"set_level": "warning" if legacy else None}
        for level in ("info", "error"):
            r = await self.c.call_tool("log_message", {"level": level, "message": f"msg at {level}"})
            out[f"call_{level}"] = tool_summary(r)["text"]
        await asyncio.sleep(0.1)
        out["received"] = list(self.logs)
        return out

    async def call_fail(self) -> dict[str, Any]:
        return tool_summary(await self.c.call_tool("fail", {}))

    async def call_unknown_tool(self) -> dict[str, Any]:
        try:
            r = await self.c.call_tool("no_such_tool", {})
        except MCPError as e:
            return error_summary(e)
        return tool_summary(r)

    async def read_unknown_resource(self) -> dict[str, Any]:
        try:
            r = await self.c.read_resource("test://nope")
        except MCPError as e:
            return error_summary(e)
        return resource_summary(r)

    async def burst(self) -> dict[str, Any]:
        async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
            try:
                return tool_summary(await self.c.call_tool(name, args))
            except MCPError as e:
                return error_summary(e)

        echoes = [await call("echo", {"text": f"hi {i}"}) for i in range(5)]
        return {"echo": echoes, "add": await call("add", {"a": 2, "b": 3})}

    async def cancel(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            await self.c.call_tool("hang", {}, read_timeout_seconds=1.0)
            out["hang"] = "returned"
        except MCPError as e:
            out["hang"] = error_summary(e)["error"]
        except TimeoutError as e:  # some paths raise the bare timeout
            out["hang"] = {"timeout": str(e)}
        out["after"] = tool_summary(await self.c.call_tool("echo", {"text": "still alive"}))
        return out


async def plan_step(c: mcp.Client, op: str, *args: Any) -> dict[str, Any]:
    """One --plan step; a JSON-RPC error is a result, not a failure."""
    try:
        if op == "list_tools":
            r = await c.list_tools()
            descriptions = {t.name: t.description for t in r.tools}
            return {"names": [t.name for t in r.tools], "descriptions": descriptions, "meta": dump(r).get("_meta")}
        if op == "list_prompts":
            r = await c.list_prompts()
            return {"names": [x.name for x in r.prompts], "meta": dump(r).get("_meta")}
        if op == "list_resources":
            r = await c.list_resources()
            return {"uris": [str(x.uri) for x in r.resources], "meta": dump(r).get("_meta")}
        if op == "list_resource_templates":
            r = await c.list_resource_templates()
            return {"uri_templates": [x.uri_template for x in r.resource_templates]}
        if op == "call":
            return tool_summary(await c.call_tool(args[0], args[1]))
        if op == "read":
            return resource_summary(await c.read_resource(args[0]))
        if op == "prompt":
            r = await c.get_prompt(args[0], args[1])
            msg_texts = [m.content.text for m in r.messages if getattr(m.content, "type", None) == "text"]
            return {"text": msg_texts[0] if msg_texts else None, "messages": len(r.messages)}
        if op == "complete":
            ref = types.PromptReference(type="ref/prompt", name=args[0])
            r = await c.complete(ref, {"name": args[1], "value": args[2]})
            return {"values": r.completion.values}
    except MCPError as e:
        return error_summary(e)
    raise ValueError(f"unknown plan op {op!r}")


def leaf_exceptions(e: BaseException) -> list[BaseException]:
    """The non-group exceptions inside (nested) exception groups."""
    subs = getattr(e, "exceptions", None)
    if not subs:
        return [e]
    return [leaf for sub in subs for leaf in leaf_exceptions(sub)]


def build_target(args: argparse.Namespace) -> Any:
    headers: dict[str, str] = {}
    for h in args.header or []:
        k, _, v = h.partition(":")
        headers[k.strip()] = v.strip()
    if args.url:
        if not headers:
            return args.url
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        return streamable_http_client(args.url, http_client=create_mcp_http_client(headers=headers))
    if args.sse:
        from mcp.client.sse import sse_client

        return sse_client(args.sse, headers=headers or None)
    argv = shlex.split(args.stdio)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.offer_version:
        # See the module docstring: initialize() reads this module global at call time.
        _mcp_client_session.LATEST_HANDSHAKE_VERSION = args.offer_version

    profile = PROFILES[args.profile]
    logs: list[dict[str, Any]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append({"level": params.level, "data": params.data, "logger": params.logger})

    client = mcp.Client(
        build_target(args),
        mode=args.mode,
        logging_callback=on_log,
        log_level="warning" if args.scenario == "logging" else None,
        client_info=types.Implementation(name="eragate-py-client", version="1.0.0"),
        read_timeout_seconds=args.timeout,
    )
    results: dict[str, Any] = {}
    async with client:
        runner = Runner(client, profile, logs)
        steps = list(SCENARIO_STEPS[args.scenario])
        if args.scenario == "connect" and args.mode == "2026-07-28":
            # mode="2026-07-28" connects without any wire traffic; make `connect` touch the server.
            steps = ["discover"]
        for step in steps:
            summary = await runner.step(step)
            if summary is not None:
                results[step] = summary
        for i, (op, *op_args) in enumerate(json.loads(args.plan or "[]")):
            results[f"{i}:{op}"] = await plan_step(client, op, *op_args)
        info = client.server_info
        return {
            "protocol_version": client.protocol_version,
            "server_info": {"name": info.name, "version": info.version} if info is not None else None,
            "capabilities": dump(client.server_capabilities),
            "results": results,
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["legacy", "2026-07-28", "auto"], default="auto")
    tgt = ap.add_mutually_exclusive_group(required=True)
    tgt.add_argument("--url", help="Streamable HTTP endpoint")
    tgt.add_argument("--stdio", help='server command line, e.g. "python legacy_server.py stdio"')
    tgt.add_argument("--sse", help="old HTTP+SSE endpoint (the GET /sse URL)")
    ap.add_argument("--scenario", choices=sorted(SCENARIO_STEPS), default="full")
    ap.add_argument("--profile", choices=sorted(PROFILES), default="fixture")
    ap.add_argument("--offer-version", help="protocol revision offered in initialize (legacy/auto)")
    ap.add_argument("--header", action="append", help="extra HTTP header 'Name: value' (repeatable)")
    ap.add_argument("--plan", help="scenario plan: a JSON list of [op, args...] steps")
    ap.add_argument("--timeout", type=float, default=30.0, help="per-request read timeout, seconds")
    args = ap.parse_args()
    if args.offer_version and args.mode == "2026-07-28":
        ap.error("--offer-version applies to the initialize handshake (modes legacy and auto)")
    for h in args.header or []:
        if ":" not in h:
            ap.error(f"--header wants 'Name: value', got {h!r}")
    if args.stdio is not None and not shlex.split(args.stdio):
        ap.error("--stdio needs a command")
    warnings.simplefilter("ignore")  # MCPDeprecationWarning for logging/setLevel etc.; stderr stays clean
    try:
        out = asyncio.run(asyncio.wait_for(run(args), timeout=args.timeout * 4))
    except KeyboardInterrupt:
        return 130
    except BaseException as e:  # noqa: BLE001 - report anything, including exception groups
        print(f"py_client: {type(e).__name__}: {e}", file=sys.stderr)
        if os.environ.get("PY_CLIENT_TRACE"):
            traceback.print_exc()
        else:
            for sub in leaf_exceptions(e):
                if sub is not e:
                    print(f"  caused by {type(sub).__name__}: {sub}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
