#!/usr/bin/env python3
"""The Python SDK's OAuth client (`mcp` 2.3.0, `mcp.client.auth.OAuthClientProvider`) against an
MCP server that requires OAuth; prints ONE JSON object.

    py_oauth_client.py --url URL [--mode 2026-07-28|legacy|auto] [--text TEXT] [--scope S]
                       [--tool NAME --arguments JSON]

It starts with no token and no registration, so the SDK does the whole flow on the first 401:
protected resource metadata (RFC 9728) → authorization server metadata (RFC 8414 / OpenID) →
dynamic client registration (RFC 7591) → authorization code with PKCE and `resource`
(RFC 8707) → token; then `tools/call echo {text}` is retried with the token. With --tool, that
tool is called next, and its result reported (a 403 `insufficient_scope` makes the SDK step up:
authorize again for the union of the scopes, then retry; mcp 2.3.0 inspects only a first
attempt's answer, not the answer to the retry after a 401, hence echo first).

There is no browser: the redirect handler follows the authorization server's redirects with a
cookie-keeping HTTP client (the test provider, tests/peers/oidc_provider.mjs, approves every
login and consent on the spot) until the redirect to our redirect URI, and hands its `code`,
`state` and `iss` to the SDK's callback. No listener is needed at the redirect URI. With
--login NAME:PASSWORD it also fills in the HTML forms it meets on the way (eragate's built-in
authorization server): the login form with NAME and PASSWORD, a consent form with "allow".
--client-id (and --client-secret) start with a pre-registered client instead of registering one;
--client-metadata-url gives the SDK an https client_id URL (a Client ID Metadata Document).

Output (exit 0):
    {"protocol_version": "...", "text": "<echo result>", "access_token": "...",
     "scope": "...", "client_id": "...", "requests": ["GET /.well-known/...", ...],
     "authorizations": N}
On failure: exit 1, the error on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
import mcp
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT_URI = "http://127.0.0.1:9/callback"


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class FormParser(HTMLParser):
    """The first form of a page: its action and its inputs (name → value)."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self.in_form = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs = dict(attrs)
        if tag == "form" and self.action is None:
            self.action, self.in_form = attrs.get("action", ""), True
        elif tag == "input" and self.in_form and attrs.get("name"):
            self.fields[attrs["name"]] = attrs.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.in_form = False


class HeadlessBrowser:
    """Follows the authorization redirects until the one to REDIRECT_URI."""

    def __init__(self, login: str | None = None) -> None:
        self.result: AuthorizationCodeResult | None = None
        self.login = login.split(":", 1) if login else None
        self.pages: list[str] = []

    authorizations = 0

    async def submit(self, browser: httpx2.AsyncClient, url: str, response: httpx2.Response) -> httpx2.Response | None:
        """Fills in and submits the page's form, if it has one and --login was given."""
        if self.login is None or "text/html" not in response.headers.get("content-type", ""):
            return None
        form = FormParser()
        form.feed(response.text)
        if form.action is None:
            return None
        data = dict(form.fields)
        if "username" in data or "password" in data:
            data["username"], data["password"] = self.login
            self.pages.append("login")
        else:
            data["decision"] = "allow"
            self.pages.append("consent")
        return await browser.post(urljoin(url, form.action), data=data)

    async def redirect(self, authorization_url: str) -> None:
        self.authorizations += 1
        async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as browser:
            url = authorization_url
            response = None
            for _ in range(20):
                if response is None:
                    response = await browser.get(url)
                location = response.headers.get("location")
                if location is None:
                    submitted = await self.submit(browser, url, response)
                    if submitted is not None:
                        response = submitted
                        continue
                if location is None:
                    raise RuntimeError(f"authorization stopped at {url}: HTTP {response.status_code} {response.text[:300]}")
                location = urljoin(url, location)
                if location.startswith(REDIRECT_URI):
                    query = parse_qs(urlparse(location).query)
                    if "error" in query:
                        raise RuntimeError(f"authorization refused: {query}")
                    self.result = AuthorizationCodeResult(
                        code=query["code"][0],
                        state=query.get("state", [None])[0],
                        iss=query.get("iss", [None])[0],
                    )
                    return
                url, response = location, None
            raise RuntimeError("too many redirects")

    async def callback(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise RuntimeError("no authorization code")
        return self.result


async def run(args: argparse.Namespace) -> dict:
    storage = MemoryStorage()
    browser = HeadlessBrowser(args.login)
    if args.client_id:
        storage.client_info = OAuthClientInformationFull(
            client_id=args.client_id,
            client_secret=args.client_secret,
            token_endpoint_auth_method="client_secret_post" if args.client_secret else "none",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        )
    auth = OAuthClientProvider(
        server_url=args.url,
        client_metadata=OAuthClientMetadata(
            client_name="eragate-oauth-test",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=args.scope,
        ),
        storage=storage,
        client_metadata_url=args.client_metadata_url,
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
    )
    requests: list[str] = []

    async def log_request(request: httpx2.Request) -> None:
        requests.append(f"{request.method} {request.url}")

    http_client = create_mcp_http_client(auth=auth)
    http_client.event_hooks["request"].append(log_request)
    client = mcp.Client(streamable_http_client(args.url, http_client=http_client), mode=args.mode)
    async with client:
        result = await client.call_tool("echo", {"text": args.text})
        if args.tool:
            result = await client.call_tool(args.tool, json.loads(args.arguments))
        text = "".join(getattr(c, "text", "") for c in result.content)
        return {
            "protocol_version": client.protocol_version,
            "text": text,
            "is_error": bool(result.is_error),
            "access_token": storage.tokens.access_token if storage.tokens else None,
            "scope": storage.tokens.scope if storage.tokens else None,
            "client_id": storage.client_info.client_id if storage.client_info else None,
            "requests": requests,
            "authorizations": browser.authorizations,
            "pages": browser.pages,
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--mode", choices=["legacy", "2026-07-28", "auto"], default="2026-07-28")
    ap.add_argument("--text", default="hello through oauth")
    ap.add_argument("--scope", default=None)
    ap.add_argument("--tool", default=None)
    ap.add_argument("--arguments", default="{}")
    ap.add_argument("--login", default=None, help="NAME:PASSWORD for HTML login forms")
    ap.add_argument("--client-id", default=None)
    ap.add_argument("--client-secret", default=None)
    ap.add_argument("--client-metadata-url", default=None, help="an https client_id URL (CIMD)")
    args = ap.parse_args()
    try:
        out = asyncio.run(asyncio.wait_for(run(args), timeout=60))
    except BaseException:  # noqa: BLE001 - report everything, including ExceptionGroup
        traceback.print_exc()
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
