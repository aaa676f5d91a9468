"""The server ``host_load.py`` measures: ``serve_app`` on uvicorn with 1 or N worker processes,
each optionally under cProfile (every thread, CPU time), its stats dumped at shutdown.

    python bench/_host_server.py PORT WORKERS SESSIONS [PROFILE_DIR]

``SESSIONS`` is ``sqlite:PATH`` or a ``postgresql://`` URL (sessions in ``$AF_HOST_SCHEMA``);
API keys come from ``$AGENTFOOTPRINT_API_KEYS``. A profiled worker writes
``PROFILE_DIR/<pid>.prof`` when uvicorn's lifespan shuts down (after SIGTERM): the main thread's
profile (from its first request carrying ``x-host-load: measure``, so imports and warm-up are
left out) merged with every other thread's from its start (the SQLite session store's
``to_thread`` calls, the run store's writer), timed with ``time.thread_time`` so waiting
costs nothing.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import pstats
import sys
import threading
import time
from pathlib import Path
from typing import Any

_PROFILES: list[cProfile.Profile] = []


def _profile_threads() -> cProfile.Profile:
    """Profile this thread and every thread started from now on."""
    run = threading.Thread.run

    def profiled(self: threading.Thread) -> None:
        profile = cProfile.Profile(time.thread_time)
        _PROFILES.append(profile)
        profile.enable()
        try:
            run(self)
        finally:
            profile.disable()

    threading.Thread.run = profiled  # type: ignore[method-assign]
    return cProfile.Profile(time.thread_time)


class _Profiled:
    """The app, with the profile dumped when the lifespan's shutdown completes."""

    def __init__(self, app: Any, main: cProfile.Profile, out: Path) -> None:
        self.app, self.main, self.out = app, main, out
        self.started = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            if not self.started and (b"x-host-load", b"measure") in scope.get("headers", ()):
                self.started = True  # the main thread from the measured phase on
                self.main.enable()
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                self.dump()
            await send(message)

        await self.app(scope, receive, sending)

    def dump(self) -> None:
        if self.started:
            self.main.disable()
        stats = pstats.Stats(self.main)
        for other in _PROFILES:
            with contextlib.suppress(TypeError):  # a thread that never ran a profiled call
                stats.add(pstats.Stats(other))
        stats.dump_stats(str(self.out / f"{os.getpid()}.prof"))


def app() -> Any:
    """One worker's app (uvicorn calls this in each process)."""
    from agentfootprint.serve import api_key_auth, serve_app

    profile_dir = os.environ.get("AF_HOST_PROFILE")
    main = _profile_threads() if profile_dir else None
    spec = os.environ["AF_HOST_SESSIONS"]
    if spec.startswith("postgresql://"):
        from agentfootprint.serve import postgres_sessions

        sessions: Any = postgres_sessions(spec, schema=os.environ.get("AF_HOST_SCHEMA",
                                                                        "public"))
    else:
        from agentfootprint.serve import sqlite_sessions

        sessions = sqlite_sessions(spec.removeprefix("sqlite:"))
    served = serve_app("_host_agent:make_agent", sessions=sessions, auth=api_key_auth(),
                       max_concurrent_per_principal=10_000, request_timeout=600)
    if main is None:
        return served
    return _Profiled(served, main, Path(profile_dir))  # type: ignore[arg-type]


if __name__ == "__main__":
    import uvicorn

    port, workers, sessions_spec = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    os.environ["AF_HOST_SESSIONS"] = sessions_spec
    if len(sys.argv) > 4:
        os.environ["AF_HOST_PROFILE"] = sys.argv[4]
    sys.path.insert(0, str(Path(__file__).parent))
    uvicorn.run("_host_server:app", factory=True, host="127.0.0.1", port=port,
                workers=workers, log_level="warning", backlog=4096,
                timeout_graceful_shutdown=120, timeout_keep_alive=600)
