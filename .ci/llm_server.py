"""llama-cpp-python's OpenAI-compatible server, made to report token usage on streamed calls.

The e2e tests need one real model server that does two things: a forced tool call
(``tool_choice={"type": "function", ...}``), which llama-cpp-python's server makes through its
``chatml-function-calling`` format, and token usage on a streamed call when the client asks for it
with ``stream_options={"include_usage": true}``, which that server (0.3.36) ignores. This launcher
closes that one gap, so CI builds llama.cpp once instead of twice:

* the request model accepts ``stream_options`` (it used to drop the field unread);
* every token ``Llama.generate`` produces for a request is counted (prompt tokens as given, sampled
  tokens up to the end-of-generation token, exactly what the non-streamed ``usage`` counts);
* a streamed chat completion that asked for usage ends, as OpenAI's does, with one extra chunk whose
  ``choices`` is empty and whose ``usage`` holds those counts.

Run it like ``python -m llama_cpp.server``: ``python .ci/llm_server.py --model M.gguf ...``.
Test infrastructure only (run by ``.ci/llm-server.sh`` in the model server's own virtualenv).
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Iterator
from typing import Any

import llama_cpp
import llama_cpp.server.types as server_types

SUPPORTED = ("0.3.",)
if not llama_cpp.__version__.startswith(SUPPORTED):
    sys.exit(f"llm_server.py: written against llama-cpp-python 0.3.x, found "
             f"{llama_cpp.__version__}; check that Llama.generate and create_chat_completion "
             f"still have the shape this launcher wraps, then widen SUPPORTED")


class _Tally:
    """Token counts of the request a ``Llama`` is serving (the server runs one at a time)."""

    def __init__(self) -> None:
        self.prompt = 0
        self.completion = 0


def _tally(llama: Any) -> _Tally:
    tally = getattr(llama, "_stream_usage_tally", None)
    if tally is None:
        tally = _Tally()
        llama._stream_usage_tally = tally
    return tally


_generate = llama_cpp.Llama.generate
_create_chat_completion = llama_cpp.Llama.create_chat_completion


def _counting_generate(self: Any, tokens: Any, *args: Any, **kwargs: Any) -> Iterator[int]:
    tally = _tally(self)
    tally.prompt += len(tokens)
    for token in _generate(self, tokens, *args, **kwargs):
        if not llama_cpp.llama_vocab_is_eog(self._model.vocab, token):
            tally.completion += 1
        yield token


def _with_usage(self: Any, chunks: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    tally = _tally(self)
    last: dict[str, Any] = {}
    for chunk in chunks:
        last = chunk
        yield chunk
    yield {
        "id": last.get("id", "chatcmpl-usage"),
        "object": "chat.completion.chunk",
        "created": last.get("created", 0),
        "model": last.get("model", ""),
        "choices": [],
        "usage": {"prompt_tokens": tally.prompt, "completion_tokens": tally.completion,
                  "total_tokens": tally.prompt + tally.completion},
    }


def _create_chat_completion_with_usage(self: Any, *args: Any, stream_options: Any = None,
                                       **kwargs: Any) -> Any:
    tally = _tally(self)
    tally.prompt = tally.completion = 0
    result = _create_chat_completion(self, *args, **kwargs)
    wants_usage = bool(stream_options and stream_options.get("include_usage"))
    if kwargs.get("stream") and wants_usage:
        return _with_usage(self, result)
    return result


class ChatCompletionRequestWithStreamOptions(server_types.CreateChatCompletionRequest):
    """The server's request model, plus OpenAI's ``stream_options``."""

    stream_options: dict[str, Any] | None = None


llama_cpp.Llama.generate = _counting_generate  # type: ignore[method-assign,assignment]
llama_cpp.Llama.create_chat_completion = _create_chat_completion_with_usage  # type: ignore[method-assign]
# Before llama_cpp.server.app is imported, so its route binds the extended request model.
server_types.CreateChatCompletionRequest = ChatCompletionRequestWithStreamOptions  # type: ignore[misc]

if __name__ == "__main__":
    if "llama_cpp.server.app" in sys.modules:
        sys.exit("llm_server.py: llama_cpp.server.app was imported before the request model "
                 "was extended; run this file as a script")
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
