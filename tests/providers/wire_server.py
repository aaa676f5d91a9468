"""A real HTTP server on 127.0.0.1 that answers as planned, faults included.

The adapters run their real clients (the ``openai`` and ``anthropic`` SDKs, ``httpx``) over a
real socket, so what is tested is what a server that cuts a stream, resets the connection or
sends a broken body does to them, not what a mock transport pretends. Each answer ends the
connection (``Connection: close``, body delimited by the close), so a stream that stops early
looks, at the HTTP level, exactly like one that finished: only the protocol's own finish signal
tells them apart.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class Reply:
    """One planned answer: status line, headers, body pieces, and how the connection ends."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    parts: list[bytes] = field(default_factory=list)
    end: Literal["close", "reset"] = "close"
    """``close``: a clean end of the body; ``reset``: the socket is aborted with an RST."""


@dataclass
class Seen:
    """A request as the server received it."""

    at: float
    """``time.monotonic()`` when its body had been read."""
    path: str
    headers: dict[str, str]
    body: Any


class WireServer:
    """Answers each request with the next planned ``Reply`` (the last one repeats)."""

    def __init__(self) -> None:
        self.replies: list[Reply] = [Reply(500, parts=[b"no plan"])]
        self.requests: list[Seen] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def plan(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests.clear()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            raw = await reader.readexactly(int(headers.get("content-length", "0")))
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw
            self.requests.append(Seen(time.monotonic(), lines[0].split(" ")[1], headers, body))
            reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
            await self._answer(reply, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _answer(reply: Reply, writer: asyncio.StreamWriter) -> None:
        head = [f"HTTP/1.1 {reply.status} X", "Connection: close"]
        head += [f"{name}: {value}" for name, value in reply.headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        for part in reply.parts:
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.005)  # pieces arrive apart, as a stream's would
        if reply.end == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        await writer.drain()


def json_reply(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"Content-Type": "application/json", **(headers or {})},
                 [json.dumps(data).encode()])


def raw_reply(body: bytes, *, content_type: str = "application/json") -> Reply:
    return Reply(200, {"Content-Type": content_type}, [body])


def sse_reply(events: list[bytes], *, end: Literal["close", "reset"] = "close") -> Reply:
    return Reply(200, {"Content-Type": "text/event-stream"}, events, end)


# -- OpenAI Chat Completions ----------------------------------------------------------------


def openai_completion(text: str) -> dict[str, Any]:
    return {"id": "chatcmpl-w", "object": "chat.completion", "created": 0, "model": "wire",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}


def openai_chunk(text: str | None, finish: str | None = None) -> bytes:
    data = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": "wire",
            "choices": [{"index": 0, "delta": {"content": text} if text else {},
                         "finish_reason": finish}]}
    return f"data: {json.dumps(data)}\n\n".encode()


def openai_stream(texts: list[str], *, finish: bool = True, done: bool = True) -> list[bytes]:
    """Content chunks, then (optionally) a ``finish_reason`` chunk and ``[DONE]``."""
    events = [openai_chunk(text) for text in texts]
    if finish:
        events.append(openai_chunk(None, "stop"))
    if done:
        events.append(b"data: [DONE]\n\n")
    return events


# -- Anthropic Messages ---------------------------------------------------------------------


def anthropic_event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def anthropic_message(text: str) -> dict[str, Any]:
    return {"id": "msg_w", "type": "message", "role": "assistant", "model": "claude-wire",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 3}}


def anthropic_stream(texts: list[str], *, stop: bool = True) -> list[bytes]:
    """``message_start`` … text deltas … and (optionally) ``message_delta`` + ``message_stop``."""
    start = {**anthropic_message(""), "content": [], "stop_reason": None,
             "usage": {"input_tokens": 5, "output_tokens": 1}}
    events = [anthropic_event("message_start", {"message": start}),
              anthropic_event("content_block_start",
                              {"index": 0, "content_block": {"type": "text", "text": ""}})]
    events += [anthropic_event("content_block_delta",
                               {"index": 0, "delta": {"type": "text_delta", "text": text}})
               for text in texts]
    if stop:
        events += [anthropic_event("content_block_stop", {"index": 0}),
                   anthropic_event("message_delta",
                                   {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                    "usage": {"output_tokens": 3}}),
                   anthropic_event("message_stop", {})]
    return events


# -- Ollama /api/chat -----------------------------------------------------------------------


def ollama_line(text: str, *, done: bool = False) -> bytes:
    data: dict[str, Any] = {"model": "wire", "message": {"role": "assistant", "content": text},
                            "done": done}
    if done:
        data.update(done_reason="stop", prompt_eval_count=5, eval_count=3)
    return (json.dumps(data) + "\n").encode()


def ollama_stream(texts: list[str], *, done: bool = True) -> list[bytes]:
    lines = [ollama_line(text) for text in texts]
    if done:
        lines.append(ollama_line("", done=True))
    return lines


def ndjson_reply(lines: list[bytes], *, end: Literal["close", "reset"] = "close") -> Reply:
    return Reply(200, {"Content-Type": "application/x-ndjson"}, lines, end)
