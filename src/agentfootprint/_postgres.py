"""PostgreSQL helpers every store shares: safe identifiers, a server's label, the DDL lock.

The memory store and the run store both take table names from the user and both create their
tables on first use; these three pieces keep that safe and their errors free of passwords. This
module imports nothing from the package but ``errors``, so every layer may use it.
"""

from __future__ import annotations

import re
from typing import Any, Final

from .errors import ConfigurationError

__all__ = ["DDL_LOCK", "check_identifier", "server_label"]

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
