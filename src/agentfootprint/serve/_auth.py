"""Who is calling: the authentication hook of ``serve_app`` and its API-key default.

An authenticator is any callable ``auth(connection) -> principal | None`` (sync or async; the
connection is Starlette's ``Request`` or ``WebSocket``). ``None`` means "not authenticated"
and the server answers 401. The principal it returns owns the sessions the caller starts.

``api_key_auth()`` is the default: ``Authorization: Bearer <key>`` checked against a table of
keys, from ``AGENTFOOTPRINT_API_KEYS`` (``"key1=alice,key2=bob"``) unless given. A server with
no keys refuses to start unless it is explicitly opened for local development
(``allow_unauthenticated=True``, the CLI's ``--insecure-local``): then every loopback caller that
names a loopback host (``Host: 127.0.0.1:8000``) is the principal ``local``; anyone else gets 401.
"""

from __future__ import annotations

import hmac
import inspect
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ._sessions import check_principal

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

__all__ = ["API_KEYS_ENV", "LOCAL_PRINCIPAL", "ApiKeyAuth", "AuthHookError", "Authenticate",
           "api_key_auth",
           "authenticate", "local_auth", "resolve_auth"]

API_KEYS_ENV = "AGENTFOOTPRINT_API_KEYS"
"""The environment variable the default authenticator reads: ``key1=alice,key2=bob``."""

LOCAL_PRINCIPAL = "local"
"""The principal of every caller of a server opened for local development."""

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost", "testclient"})
"""Client hosts a local-development server accepts (``testclient``: Starlette's in-process
test client, which never arrives over a socket)."""

Authenticate = Callable[["HTTPConnection"], "str | Awaitable[str | None] | None"]
"""``auth(connection) -> principal`` (or ``None``: 401); sync or async."""


class ApiKeyAuth:
    """``Authorization: Bearer <key>`` → the key's principal; compared in constant time."""

    def __init__(self, keys: Mapping[str, str]) -> None:
        self._keys = tuple((key.encode(), principal) for key, principal in keys.items())

    @property
    def configured(self) -> bool:
        """Whether any key is configured (a server without keys refuses to start)."""
        return bool(self._keys)

    def __repr__(self) -> str:  # never the keys
        return f"<ApiKeyAuth {len(self._keys)} key(s)>"

    def __call__(self, connection: HTTPConnection) -> str | None:
        header = connection.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return None
        offered = given.strip().encode("utf-8", "surrogateescape")
        found: str | None = None
        for key, principal in self._keys:  # every key compared: the time says nothing
            if hmac.compare_digest(key, offered):
                found = principal
        return found


def api_key_auth(keys: Mapping[str, str] | str | None = None) -> ApiKeyAuth:
    """The API-key authenticator: ``keys`` maps key → principal (or is the
    ``"key1=alice,key2=bob"`` text); by default ``$AGENTFOOTPRINT_API_KEYS``.

    A malformed table raises ``ConfigurationError`` naming the entry by position, never the
    key itself.
    """
    if keys is None:
        keys = os.environ.get(API_KEYS_ENV, "")
    table = _parse(keys) if isinstance(keys, str) else dict(keys)
    for position, (key, principal) in enumerate(table.items(), 1):
        if not isinstance(key, str) or len(key) < 8 or any(c.isspace() for c in key):
            raise ConfigurationError(
                f"API key #{position} must be a string of 8 or more characters without "
                "spaces; use a long random key (python -c 'import secrets; "
                "print(secrets.token_urlsafe())')")
        check_principal(principal)
    return ApiKeyAuth(table)


def _parse(text: str) -> dict[str, str]:
    table: dict[str, str] = {}
    for position, entry in enumerate((e.strip() for e in text.split(",")), 1):
        if not entry:
            continue
        key, sep, principal = entry.partition("=")
        if not sep or not key.strip() or not principal.strip():
            raise ConfigurationError(
                f"{API_KEYS_ENV} entry #{position} must be 'key=principal' "
                "(e.g. 'k3y-for-alice=alice,k3y-for-bob=bob')")
        table[key.strip()] = principal.strip()
    return table


def local_auth(connection: HTTPConnection) -> str | None:
    """Local development: a loopback caller naming a loopback host is ``local``; anyone else
    is refused (the ``Host`` check keeps a web page on a DNS-rebound name from reaching the
    server through the browser of the person developing)."""
    client = connection.client
    if client is None or client.host not in LOOPBACK:
        return None
    return LOCAL_PRINCIPAL if connection.url.hostname in LOOPBACK else None


def resolve_auth(auth: Authenticate | None, *, allow_unauthenticated: bool) -> Authenticate:
    """The authenticator a server uses; refuses (``ConfigurationError``) a server that would
    let anyone in without being asked to."""
    if auth is not None:
        if allow_unauthenticated:
            raise ConfigurationError(
                "pass auth=... or allow_unauthenticated=True, not both: the first checks "
                "callers, the second opens the server to loopback callers as 'local'")
        if not callable(auth):
            raise ConfigurationError(
                f"auth={type(auth).__name__} must be callable: auth(request) -> principal or "
                "None, e.g. api_key_auth({'key': 'alice'})")
        if isinstance(auth, ApiKeyAuth) and not auth.configured:
            raise ConfigurationError(_NO_KEYS)
        return auth
    if allow_unauthenticated:
        return local_auth
    default = api_key_auth()
    if not default.configured:
        raise ConfigurationError(_NO_KEYS)
    return default


_NO_KEYS = (f"no API keys are configured, so the server would let anyone in: set {API_KEYS_ENV}="
            "'key1=alice,key2=bob' (or pass auth=...), or open it for local development only "
            "with allow_unauthenticated=True / --insecure-local (binds 127.0.0.1)")


class AuthHookError(RuntimeError):
    """The auth hook returned something that cannot own a session: the server's mistake
    (answered 500 and logged), never the caller's."""


async def authenticate(auth: Authenticate, connection: HTTPConnection) -> str | None:
    """The caller's principal (``None``: not authenticated); ``AuthHookError`` when the hook
    returns anything but ``None`` or a principal string."""
    found: Any = auth(connection)
    if inspect.isawaitable(found):
        found = await found
    if found is None:
        return None
    try:
        return check_principal(found)
    except ConfigurationError as exc:
        raise AuthHookError(f"the auth hook returned an unusable principal: {exc}") from None
