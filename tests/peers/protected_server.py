#!/usr/bin/env python3
"""A protected MCP upstream: the Python SDK `mcp` 2.3.0's own resource-server support
(MCPServer with `AuthSettings` and a `TokenVerifier`) over Streamable HTTP, for eragate's
tests of credentials toward upstreams.

    protected_server.py --issuer URL [--port N] [--events FILE] [--static-token TOKEN]

Tokens are verified as RFC 9068 JWTs with PyJWT against the issuer's JWKS (`<issuer>/jwks`,
oidc-provider's): signature, `iss` equal to --issuer, `aud` containing this server's own URL
(`http://127.0.0.1:PORT/mcp`). With --static-token, that exact token is accepted as well (for
static-header credentials), as principal `static`.

Tools:
  whoami{} -> text: JSON {"sub", "aud", "client_id", "scope", "token_sha256"} of the token the
              request carried (token_sha256: hex SHA-256 of the raw bearer token)
  echo{text} -> "echo: <text>"
  revoke{} -> "revoked": the token this request carried is refused from now on (401), as by
              an authorization server that revoked it before its expiry

--events FILE appends one JSON line per HTTP request: {"method", "path", "token_sha256"}
(token_sha256 null when there was no bearer token), so a test can check that every request
(POSTs, the GET stream, DELETE) carried a credential, and which.

Prints one line to stdout once listening:
    {"listening": "http://127.0.0.1:PORT/mcp", "port": PORT}
"""

import argparse
import hashlib
import json
import socket
import sys
from typing import Any

import anyio
import jwt
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class JwtVerifier:
    """RFC 9068 access tokens from `issuer`, for the resource `resource`."""

    def __init__(self, issuer: str, resource: str, static_token: str | None) -> None:
        self.issuer = issuer
        self.resource = resource
        self.static_token = static_token
        self.keys = jwt.PyJWKClient(f"{issuer}/jwks", cache_keys=True)
        self.revoked: set[str] = set()

    async def verify_token(self, token: str) -> AccessToken | None:
        if sha256(token) in self.revoked:
            print("refused a revoked token", file=sys.stderr)
            return None
        if self.static_token is not None and token == self.static_token:
            return AccessToken(token=token, client_id="static", scopes=[], subject="static", claims={})
        try:
            key = await anyio.to_thread.run_sync(self.keys.get_signing_key_from_jwt, token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=["ES256", "RS256", "EdDSA"],
                audience=self.resource,
                issuer=self.issuer,
            )
        except Exception as error:  # any refusal is a 401, which is what the test wants to see
            print(f"refused a token: {error}", file=sys.stderr)
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=claims.get("exp"),
            resource=self.resource,
            subject=claims.get("sub"),
            claims=claims,
        )


class Events:
    """An ASGI wrapper recording each HTTP request's bearer token digest."""

    def __init__(self, app: Any, path: str | None) -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.path:
            headers = dict(scope.get("headers") or [])
            value = headers.get(b"authorization", b"").decode()
            token = value[7:] if value.lower().startswith("bearer ") else None
            line = {"method": scope["method"], "path": scope["path"], "token_sha256": token and sha256(token)}
            with open(self.path, "a") as events:
                events.write(json.dumps(line) + "\n")
        await self.app(scope, receive, send)


def build(issuer: str, port: int, static_token: str | None) -> Any:
    resource = f"http://127.0.0.1:{port}/mcp"
    verifier = JwtVerifier(issuer, resource, static_token)
    server = MCPServer(
        "protected",
        token_verifier=verifier,
        auth=AuthSettings(issuer_url=issuer, resource_server_url=resource, validate_token_resource=False),
    )

    @server.tool()
    def whoami() -> str:
        """The claims of the access token this request carried."""
        token = get_access_token()
        if token is None:
            return json.dumps(None)
        claims = token.claims or {}
        return json.dumps(
            {
                "sub": token.subject,
                "aud": claims.get("aud"),
                "client_id": token.client_id,
                "scope": claims.get("scope"),
                "token_sha256": sha256(token.token),
            }
        )

    @server.tool()
    def revoke() -> str:
        """Refuses the token this request carried from now on."""
        token = get_access_token()
        if token is not None:
            verifier.revoked.add(sha256(token.token))
        return "revoked"

    @server.tool()
    def echo(text: str) -> str:
        """Echoes its argument."""
        return f"echo: {text}"

    return server.streamable_http_app(host="127.0.0.1")


async def serve(args: argparse.Namespace) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    app = Events(build(args.issuer, port, args.static_token), args.events)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(userver.serve, [sock])
        while not userver.started:
            await anyio.sleep(0.02)
        print(json.dumps({"listening": f"http://127.0.0.1:{port}/mcp", "port": port}), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--events")
    parser.add_argument("--static-token")
    anyio.run(serve, parser.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
