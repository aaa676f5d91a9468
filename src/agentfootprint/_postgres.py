"""PostgreSQL helpers every store shares: safe identifiers, a server's label, the DDL lock.

The memory store and the run store both take table names from the user and both create their
tables on first use; these three pieces keep that safe and their errors free of passwords. This
module imports nothing from the package but ``errors``, so every layer may use it.
"""

from __future__ import annotations

import re
from typing import Any, Final

from .errors import ConfigurationError

__all__ = ["DDL_LOCK", "INSTALL_HINT", "check_identifier", "import_driver", "server_label"]

INSTALL_HINT: Final = 'pip install "agentfootprint[postgres]"'
"""What a missing driver's error tells the user to run."""

DDL_LOCK: Final = "agentfootprint.ddl"
"""The advisory-lock name every agentfootprint schema change in PostgreSQL serialises on."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_identifier(owner: str, kind: str, value: object, max_length: int) -> str:
    """``value`` when it is a plain SQL identifier of at most ``max_length`` characters."""
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value) or len(value) > max_length:
        raise ConfigurationError(
            f"{owner}({kind}={value!r}) must be a plain SQL identifier: a letter or '_' "
            f"followed by letters, digits or '_', at most {max_length} characters."
        )
    return value


def server_label(driver: Any, conninfo: str) -> str:
    """``dbname@host:port`` of a connection string, for names in errors — never its password."""
    try:
        params = driver.conninfo.conninfo_to_dict(conninfo)
    except driver.Error:
        return "?"
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = f":{params['port']}" if params.get("port") else ""
    return f"{params.get('dbname') or params.get('user') or '?'}@{host}{port}"


def import_driver(owner: str) -> tuple[Any, Any]:
    """psycopg and psycopg_pool, imported only when ``owner`` (a pooled store) is made."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ConfigurationError(
            f"{owner} needs psycopg 3 and psycopg-pool ({exc.name!r} is missing); "
            f"install them with: {INSTALL_HINT}") from exc
    return psycopg, psycopg_pool
