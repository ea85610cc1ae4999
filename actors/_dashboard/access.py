"""Who may open the dashboard: anyone on this machine when it listens on loopback, otherwise only
holders of the cluster key, who present a token derived from it.

The token is an HMAC of a fixed label under the cluster key, so the key itself never travels in a URL
or lands in a browser's history; anyone with the key computes the same token (``dashboard_token``).
A page opened with ``?token=...`` gets it back as an HttpOnly cookie, so its scripts, styles and API
calls need nothing more.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "audition_dashboard_token"
HEADER = "x-audition-token"
_LABEL = b"audition dashboard v1"


def dashboard_token(key: bytes) -> str:
    """The token that opens a dashboard served beyond loopback with cluster key ``key``."""
    return hmac.new(key, _LABEL, hashlib.sha256).hexdigest()[:40]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def presented(scope: Scope) -> tuple[str | None, bool]:
    """(the token a request carries, whether it came in the query string)."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("token"):
        return query["token"][0], True
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    if headers.get(HEADER):
        return headers[HEADER], False
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), False
    if "cookie" in headers:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers["cookie"])
        except Exception:
            return None, False
        if COOKIE in jar:
            return jar[COOKIE].value, False
    return None, False


class RequireToken:
    """ASGI middleware: every HTTP request must carry ``token`` (query, header or cookie), else 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        got, from_query = presented(scope)
        if got is None or not hmac.compare_digest(got.encode(), self.token.encode()):
            why = "no token" if got is None else "a wrong token"
            body = (f"audition dashboard: this request carries {why}. Open the address that `audition dashboard` "
                    "printed (it ends in ?token=...), or send the header X-Audition-Token; the token comes from "
                    "the cluster key (docs/dashboard.md).\n").encode()
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
            await send({"type": "http.response.body", "body": body})
            return
        if not from_query:
            await self.app(scope, receive, send)
            return

        async def with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie.encode())]
            await send(message)

        await self.app(scope, receive, with_cookie)


__all__ = ["COOKIE", "HEADER", "RequireToken", "dashboard_token", "is_loopback", "presented"]
