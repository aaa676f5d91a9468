"""The run browser: a Starlette app over a run store — list runs, open one, prove its cause.

``browser_app(store, agent=...)`` is the ASGI app ``agentfootprint ui`` serves, and what a host
mounts (``Mount("/runs-ui", app=browser_app(...))``). Pages are rendered on the server; the one
script (served by the app, no CDN) starts a prove job and polls its progress. One run's page
frames the run's HTML report (``render_html_report``, the same page ``agentfootprint report``
writes) with its kept proofs; proving goes through ``prove_stored_run`` (the code path of
``agentfootprint prove``), so the verdicts are kept in the run store with their criterion.

Local by default: without ``auth`` only a loopback ``Host`` is served (a DNS-rebinding page
cannot read it), and ``check_bind`` refuses a non-loopback address. ``auth`` is a callable
``request -> principal`` (sync or async); ``None`` from it is a 401. Every POST must carry the
app's token and, when the browser says where it comes from, come from this origin.
"""

from __future__ import annotations

import hmac
import inspect
import ipaddress
import logging
import secrets
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ...audit._cli import stored_run_warning
from ...errors import AgentFootprintError, ConfigurationError, RunError
from ...explain._criterion import WrongIf
from ...explain._kept import is_redacted, kept_proof
from ...explain._localize import DEFAULT_BUDGET
from ...explain._verdict import DEFAULT_ALPHA
from ...explain.report._render import render_html_report
from ...runs._lifecycle import check_run_id
from ...runs._recording import Recording
from ...runs._sqlite import DEFAULT_RUN_STORE, RunStore
from ...runs._store import RunStorePort
from ...runs._usage import usage_of
from ...runs._view import RunView
from ._assets import CSS, JS, PAGE_POLICY, REPORT_POLICY
from ._jobs import ProveJobs
from ._pages import Choice, RunFacts, problem_page, run_page, runs_page
from ._query import PAGE_SIZE, BadFilter, RunFilter, RunPage, page_of_runs

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["Auth", "browser_app", "check_bind"]

Auth = Callable[[Any], Any | Awaitable[Any]]
"""``request -> principal``: anything but ``None`` lets the request in."""
_INSTALL = 'pip install "agentfootprint[server]"'
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
_PHRASE_LIMIT = 200
_log = logging.getLogger("agentfootprint.serve.browser")


def check_bind(host: str, auth: Auth | None) -> None:
    """Refuse to listen beyond this machine without an ``auth`` callable."""
    if auth is None and not _is_loopback(host):
        raise ConfigurationError(
            f"the run browser serves every recorded run; it binds {host!r} only with an "
            "authentication callable (--auth module:function, or auth= a callable request -> "
            "principal) — or bind 127.0.0.1")


def _is_loopback(host: str) -> bool:
    name = host.strip().lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


class _Stores:
    """A store handle per use: a SQLite store is opened per request and per job (its connection
    belongs to one thread); any other store is shared, each call made under one lock (never
    held across a job's re-runs)."""

    def __init__(self, store: str | Path | RunStorePort) -> None:
        self._lock = threading.Lock()
        self._shared: RunStorePort | None = None
        if isinstance(store, str) and store.startswith(("postgresql://", "postgres://")):
            from ...runs._postgres import PostgresRunStore

            store = cast(RunStorePort, PostgresRunStore(store))  # lives as long as the app
        if isinstance(store, str | Path):
            self.path: Path | None = Path(store)
            RunStore(self.path).close()  # created or upgraded now; a non-store file fails here
            self.label = str(self.path)
        elif isinstance(store, RunStore):
            self.path, self.label = store.path, str(store.path)
        elif isinstance(store, RunStorePort):
            self.path, self._shared = None, store
            self.label = str(getattr(store, "name", type(store).__name__))
        else:
            raise ConfigurationError(
                f"store={store!r} is not a run store; pass a SQLite file path, a RunStore or a "
                "PostgresRunStore")

    @contextmanager
    def open(self) -> Iterator[RunStorePort]:
        if self._shared is None:
            assert self.path is not None
            with RunStore(self.path) as store:
                yield store
            return
        yield cast(RunStorePort, _Serialized(self._shared, self._lock))

    def page(self, wanted: RunFilter, page_size: int) -> RunPage:
        """A page of the runs list."""
        with self.open() as store:
            return page_of_runs(store, wanted, page_size=page_size)


class _Serialized:
    """A shared store whose every call holds the lock for that call only."""

    def __init__(self, store: RunStorePort, lock: threading.Lock) -> None:
        self._store = store
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return value(*args, **kwargs)

        return call


def browser_app(store: str | Path | RunStorePort = DEFAULT_RUN_STORE, *,
                agent: str | None = None, auth: Auth | None = None,
                predicates: Sequence[str] = (), budget: int | None = DEFAULT_BUDGET,
                alpha: float = DEFAULT_ALPHA, page_size: int = PAGE_SIZE) -> Starlette:
    """The run browser as a Starlette app (mount it, or serve it with uvicorn).

    ``store`` is what ``--store`` takes (a SQLite file, or a ``postgresql://`` URL) or a run
    store. ``agent`` is the ``"module:function"`` that rebuilds the agent for re-runs (default: the
    factory recorded with each run). ``predicates`` are ``"module:function"`` criteria the prove
    form offers beside a typed phrase (a form never names code to import). ``budget`` and
    ``alpha`` are ``prove``'s; ``page_size`` is how many runs a page of the list shows.
    Mounted in another app, its lifespan does not run: call ``app.state.prove_jobs.close()``
    from the host's shutdown to drop queued prove jobs.
    """
    try:
        from starlette.applications import Starlette
        from starlette.middleware import Middleware
        from starlette.routing import Route
    except ImportError as exc:
        raise ConfigurationError(f"the run browser needs Starlette ({exc.name!r} is missing); "
                                 f"install it with: {_INSTALL}") from exc
    for path in (agent, *predicates):
        if path is not None and (not isinstance(path, str) or ":" not in path):
            raise ConfigurationError(f"{path!r} must be 'module:function'")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ConfigurationError(f"page_size={page_size!r} must be a whole number of 1 or more")
    if auth is not None and not callable(auth):
        raise ConfigurationError(f"auth={auth!r} must be a callable request -> principal")
    browser = _Browser(_Stores(store), agent, tuple(WrongIf(predicate=p) for p in predicates),
                       budget, alpha, page_size)
    routes = [
        Route("/", browser.runs, methods=["GET"]),
        Route("/runs/{run_id:str}", browser.run, methods=["GET"]),
        Route("/runs/{run_id:str}/report", browser.report, methods=["GET"]),
        Route("/runs/{run_id:str}/prove", browser.prove, methods=["POST"]),
        Route("/jobs/{job_id:str}", browser.job, methods=["GET"]),
        Route("/static/browser.css", browser.css, methods=["GET"]),
        Route("/static/browser.js", browser.js, methods=["GET"]),
    ]

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            browser.jobs.close()

    app = Starlette(routes=routes, lifespan=lifespan, max_body_size=16_384,
                    middleware=[Middleware(_Guard, browser=browser, auth=auth)],
                    exception_handlers={404: browser.not_found, 405: browser.not_allowed,
                                        Exception: browser.failed})
    app.state.prove_jobs = browser.jobs
    app.state.store_label = browser.stores.label  # never a password
    return app


class _Browser:
    """The routes' state and handlers."""

    def __init__(self, stores: _Stores, agent: str | None, predicates: tuple[WrongIf, ...],
                 budget: int | None, alpha: float, page_size: int) -> None:
        self.stores = stores
        self.page_size = page_size
        self.agent = agent
        self.predicates = predicates
        self.token = secrets.token_urlsafe(32)
        self.jobs = ProveJobs(stores.open, factory=agent, budget=budget, alpha=alpha)

    # pages -------------------------------------------------------------------------------
    def runs(self, request: Any) -> Any:
        try:
            wanted = RunFilter.parse(request.query_params)
        except BadFilter as exc:
            return self.problem(request, 400, str(exc))
        page = self.stores.page(wanted, self.page_size)
        return self.html(runs_page(_root(request), self.stores.label, page, wanted))

    def run(self, request: Any) -> Any:
        run_id = request.path_params["run_id"]
        found = self.load(request, run_id)
        if not isinstance(found, tuple):
            return found
        recording, proofs, _ = found
        proof = kept_proof(proofs, redacted=is_redacted(recording))
        usage = usage_of(recording.commit_log())
        cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
        facts = RunFacts(
            run_id, recording.name, recording.kind, recording.status, recording.created_at,
            RunView.of(recording).answer if recording.kind == "agent" else None,
            f"{len(usage.calls)} LLM call(s), {usage.total_tokens} tokens, cost {cost}",
            proof.lines() if proof else (), self.cannot_prove(recording),
            [Choice(key, rule.describe()) for key, rule in self.criteria(recording, proofs)],
            self.jobs.active(run_id))
        return self.html(run_page(_root(request), self.stores.label, facts, self.token))

    def report(self, request: Any) -> Any:
        from starlette.responses import HTMLResponse

        found = self.load(request, request.path_params["run_id"])
        if not isinstance(found, tuple):
            return found
        recording, proofs, head = found
        page = render_html_report(recording, localization=proofs, chain_head=head)
        return HTMLResponse(page, headers={"Content-Security-Policy": REPORT_POLICY,
                                           **_COMMON_HEADERS})

    # proving ------------------------------------------------------------------------------
    async def prove(self, request: Any) -> Any:
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse, RedirectResponse

        wants_json = "application/json" in request.headers.get("accept", "")
        try:
            form = await request.form(max_files=0, max_fields=8, max_part_size=4096)
        except Exception:  # a body that is not a form
            return self.problem(request, 400, "the prove request is not a form; send phrase= "
                                "(or saved=) and token= as a form", wants_json)
        token = form.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token, self.token):
            return self.problem(request, 403, "the prove request lacks this page's token; "
                                "reload the run's page and press prove there", wants_json)
        run_id = request.path_params["run_id"]
        try:
            chosen = await run_in_threadpool(self.choose, run_id, form.get("phrase"),
                                             form.get("saved"))
        except _Refused as exc:
            return self.problem(request, exc.status, str(exc), wants_json)
        job = self.jobs.submit(run_id, chosen)
        if wants_json:
            return JSONResponse(self.jobs.get(job.id), status_code=202)
        return RedirectResponse(f"{_root(request)}/runs/{_quoted(run_id)}", status_code=303)

    def choose(self, run_id: str, phrase: Any, saved: Any) -> WrongIf:
        """The criterion a prove form asks for; ``_Refused`` with the sentence when it cannot."""
        with self.stores.open() as store:
            recording, proofs = self.recorded(store, run_id)
        why = self.cannot_prove(recording)
        if why is not None:
            raise _Refused(409, why)
        phrase = phrase.strip() if isinstance(phrase, str) else ""
        saved = saved.strip() if isinstance(saved, str) else ""
        if bool(phrase) == bool(saved):
            raise _Refused(400, "say what was wrong in one way: type a phrase the answer should "
                                "not contain, or pick a saved criterion (not both)")
        if saved:
            rule = dict(self.criteria(recording, proofs)).get(saved)
            if rule is None:
                raise _Refused(400, f"there is no saved criterion {saved[:40]!r} for this run; "
                                    "pick one from the list or type a phrase")
            return rule
        if len(phrase) > _PHRASE_LIMIT or not phrase.isprintable():
            raise _Refused(400, f"the phrase must be at most {_PHRASE_LIMIT} plain characters "
                                "(no control characters); type the words the wrong answer "
                                "contains, e.g. APPROVED")
        rule = WrongIf(contains=phrase)
        answer = RunView.of(recording).answer or ""
        if not rule(answer):
            raise _Refused(400, f"the run's answer does not contain {phrase!r}, so by that "
                                "criterion it is not wrong; type a phrase from the wrong answer")
        return rule

    def job(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        found = self.jobs.get(request.path_params["job_id"])
        if found is None:
            return self.problem(request, 404, "no such prove job (jobs live as long as the "
                                "server); reload the run's page", True)
        return JSONResponse(found, headers={"Cache-Control": "no-store"})

    def cannot_prove(self, recording: Recording) -> str | None:
        """Why this run cannot be proven here, or None."""
        if recording.kind != "agent":
            return "Only an agent's run can be proven: a flowchart's run has no context to remove."
        if RunView.of(recording).answer is None:
            return (f"This run handed back no answer (status {recording.status}); there is "
                    "nothing to prove.")
        if self.agent is None and not isinstance(recording.meta.get("factory"), str):
            return ("No agent factory is known for this run: start the browser with "
                    "--agent module:function (a function that returns the agent), or record "
                    "the run with meta={'factory': 'module:function'}.")
        return None

    def criteria(self, recording: Recording, proofs: list[dict[str, Any]]
                 ) -> list[tuple[str, WrongIf]]:
        """The saved criteria offered for a run: the server's predicates, the one recorded
        with the run (``meta["wrong_if"]``), and those its kept proofs were judged by."""
        found: list[WrongIf] = list(self.predicates)
        candidates = [recording.meta.get("wrong_if")]
        candidates += [p.get("criterion") for p in proofs]
        for raw in candidates:
            if not isinstance(raw, dict):
                continue
            rule = {k: v for k, v in raw.items()
                    if k in ("contains", "matches", "predicate", "judges_result")}
            try:
                parsed = WrongIf(**rule)
            except ValueError:
                continue
            if parsed not in found:
                found.append(parsed)
        return [(f"c{index}", rule) for index, rule in enumerate(found)]

    # plumbing -----------------------------------------------------------------------------
    def load(self, request: Any, run_id: str) -> Any:
        """``(recording, proofs, chain head)`` of a run, or the problem page to answer."""
        try:
            with self.stores.open() as store:
                recording, proofs = self.recorded(store, run_id)
                tampered = stored_run_warning(store, recording)
                reader = getattr(store, "chain_head", None)
                head = reader(run_id) if callable(reader) else None
        except _Refused as exc:
            return self.problem(request, exc.status, str(exc))
        if tampered:
            return self.problem(request, 409, f"{tampered}; the browser does not show an "
                                "altered run as the one that happened")
        return recording, proofs, head

    def recorded(self, store: RunStorePort, run_id: str
                 ) -> tuple[Recording, list[dict[str, Any]]]:
        try:
            check_run_id(run_id)
            return store.load(run_id), store.proofs(run_id)
        except (KeyError, ConfigurationError):
            raise _Refused(404, f"there is no run {run_id[:80]!r} in this store; pick one from "
                                "the runs list") from None
        except RunError as exc:  # a damaged row: said, and left as it is
            raise _Refused(500, str(exc)) from None

    def html(self, page: str, status: int = 200) -> Any:
        from starlette.responses import HTMLResponse

        return HTMLResponse(page, status_code=status,
                            headers={"Content-Security-Policy": PAGE_POLICY, **_COMMON_HEADERS})

    def problem(self, request: Any, status: int, sentence: str, as_json: bool = False) -> Any:
        if as_json:
            from starlette.responses import JSONResponse

            return JSONResponse({"error": sentence}, status_code=status,
                                headers=dict(_COMMON_HEADERS))
        return self.html(problem_page(_root(request), self.stores.label, status, sentence),
                         status)

    def css(self, request: Any) -> Any:
        from starlette.responses import Response

        return Response(CSS, media_type="text/css", headers=dict(_COMMON_HEADERS))

    def js(self, request: Any) -> Any:
        from starlette.responses import Response

        return Response(JS, media_type="text/javascript", headers=dict(_COMMON_HEADERS))

    async def not_found(self, request: Any, exc: Exception) -> Any:
        return self.problem(request, 404, "there is no such page in the run browser; start "
                            "from the runs list")

    async def not_allowed(self, request: Any, exc: Exception) -> Any:
        return self.problem(request, 405, f"{request.method} is not allowed here; use the "
                            "links and buttons of the pages")

    async def failed(self, request: Any, exc: Exception) -> Any:
        from starlette.responses import HTMLResponse

        if isinstance(exc, AgentFootprintError):
            sentence = str(exc)
        else:
            sentence = (f"the run browser failed ({type(exc).__name__}); the server's log has "
                        "the details")
        page = problem_page(_root(request), self.stores.label, 500, sentence)
        return HTMLResponse(page, status_code=500,
                            headers={"Content-Security-Policy": PAGE_POLICY, **_COMMON_HEADERS})


class _Refused(Exception):
    """A request the browser answers with a page of one sentence (4xx; 500 for a damaged
    stored run): ``status`` and the sentence."""

    def __init__(self, status: int, sentence: str) -> None:
        super().__init__(sentence)
        self.status = status


_COMMON_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                   "Cache-Control": "no-store"}


def _root(request: Any) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def _quoted(run_id: str) -> str:
    from urllib.parse import quote

    return quote(run_id, safe="")


class _Guard:
    """Who may ask: a loopback ``Host`` (no ``auth``) or a principal from ``auth``; a POST
    only from this origin. Answers refusals itself; passes everything else to ``app``."""

    def __init__(self, app: Any, *, browser: _Browser, auth: Auth | None) -> None:
        self.app = app
        self.browser = browser
        self.auth = auth

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request

        request = Request(scope, receive)
        refusal = await self.refusal(request)
        if refusal is not None:
            status, sentence = refusal
            as_json = "application/json" in request.headers.get("accept", "")
            await self.browser.problem(request, status, sentence, as_json)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def refusal(self, request: Any) -> tuple[int, str] | None:
        if self.auth is None:
            host = request.headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if not _is_loopback(name):
                return 400, ("this run browser serves this machine only (Host must be "
                             "127.0.0.1, localhost or [::1]); give it an auth callable to "
                             "serve others")
        else:
            try:
                principal = self.auth(request)
                if inspect.isawaitable(principal):
                    principal = await principal
            except Exception:  # the hook's own failure: logged, answered as one sentence
                _log.exception("the run browser's authentication hook failed")
                return 500, ("the authentication hook failed; the server's log has the "
                             "details")
            if principal is None:
                return 401, "sign in first: this run browser needs an authenticated request"
            request.scope.setdefault("state", {})["principal"] = principal
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            origin = request.headers.get("origin")
            site = request.headers.get("sec-fetch-site")
            own = f"{request.url.scheme}://{request.headers.get('host', '')}"
            if (origin is not None and origin != own) or site not in (None, "same-origin"):
                return 403, ("this request came from another site; prove from the run's own "
                             "page in the browser")
        return None

