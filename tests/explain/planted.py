"""Generated planted-bug scenarios: one culprit among innocents, in every kind of context.

Each scenario plants a token in exactly one source (a fact, a steering rule, a memory entry,
a RAG chunk, a tool result, or a fact of the upstream agent of a composition) among 3-12
innocent ones, and a model that answers WRONG whenever the token reaches it. With ``noise``
each final answer is independently flipped with that probability (a sampling model, declared
as such). The run being explained is the first original run that answered wrong.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from agentfootprint import Agent, define_fact, define_steering, tool
from agentfootprint.compose import Sequence
from agentfootprint.memory import InMemoryStore, MemoryIdentity, define_memory
from agentfootprint.memory.embedding import mock_embedder
from agentfootprint.providers import LLMRequest, mock
from agentfootprint.rag import Document, define_rag, index_documents

KINDS = ("fact", "steering", "memory", "rag", "tool", "composition")
QUESTION = "What should we do about ticket 42?"
WORDS = ("customer", "shipping", "invoice", "policy", "window", "priority", "discount",
         "warehouse", "manager", "refund", "contract", "account", "delivery", "region",
         "support", "escalate", "quota", "weekly", "archive", "summary")


@dataclass
class Planted:
    kind: str
    culprit: str
    """The suspect id of the planted source."""
    innocents: list[str]
    runner: Any
    """What ran (an Agent or a Sequence); ``result.source`` is set from it."""
    result: Any = None


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 9))).capitalize() + "."


def _model(token: str, noise: float, rng: random.Random, tools: int = 0) -> Any:
    def respond(request: LLMRequest) -> Any:
        last = request.messages[-1]
        if last["role"] == "user" and last["content"] != QUESTION:
            return "ok"  # an earlier turn of a memory scenario
        offered = [t["name"] for t in request.tools]
        answered = any(m["role"] == "tool" for m in request.messages)
        if tools and offered and not answered:
            return {"tool_calls": [{"name": name, "args": {"ticket": 42}} for name in offered]}
        seen = (request.system or "") + " ".join(str(m["content"]) for m in request.messages)
        wrong = token in seen
        if noise and rng.random() < noise:
            wrong = not wrong
        return "WRONG: escalate everything." if wrong else "Handled by the usual policy."

    return mock(respond=respond, deterministic=not noise)


async def build(seed: int, *, noise: float = 0.0, kind: str | None = None) -> Planted:
    """Scenario ``seed`` (its kind cycles through ``KINDS`` unless given)."""
    rng = random.Random(seed)
    kind = kind or KINDS[seed % len(KINDS)]
    n = rng.randint(3, 12)
    culprit = rng.randrange(n)
    token = f"override-{seed}-zq"
    texts = [_sentence(rng) for _ in range(n)]
    texts[culprit] = f"{_sentence(rng)[:-1]} {token}."
    model_rng = random.Random(seed * 7919 + 1)

    if kind in ("fact", "steering"):
        make = define_fact if kind == "fact" else None
        context = [make(id=f"s{i}", data=t) if make else define_steering(id=f"s{i}", prompt=t)
                   for i, t in enumerate(texts)]
        agent = Agent(provider=_model(token, noise, model_rng), model="m", context=context)
        ids = [f"s{i}" for i in range(n)]
        return Planted(kind, ids[culprit], [i for i in ids if i != ids[culprit]], agent)
    if kind == "memory":
        store = InMemoryStore()
        identity = MemoryIdentity(f"conv-{seed}")
        memory = define_memory(id="chat", type="episodic", strategy="window",
                               keep_turns=20, store=store)
        agent = Agent(provider=_model(token, noise, model_rng), model="m", memory=[memory],
                      identity=identity)
        for text in texts:
            await agent.run(text)
        ids = [f"memory:chat#msg-{t}-{j}" for t in range(1, n + 1) for j in (0, 1)]
        planted = f"memory:chat#msg-{culprit + 1}-0"
        return Planted(kind, planted, [i for i in ids if i != planted], agent)
    if kind == "rag":
        store = InMemoryStore()
        corpus = MemoryIdentity(f"kb-{seed}")
        embedder = mock_embedder()
        await index_documents(store, corpus, [Document(uri=f"d{i}.md", text=t)
                                              for i, t in enumerate(texts)], embedder=embedder)
        rag = define_rag(id="docs", store=store, identity=corpus, embedder=embedder, k=n,
                         threshold=None)
        agent = Agent(provider=_model(token, noise, model_rng), model="m", memory=[rag],
                      identity=MemoryIdentity(f"user-{seed}"))
        ids = [f"memory:docs#d{i}.md#0" for i in range(n)]
        return Planted(kind, ids[culprit], [i for i in ids if i != ids[culprit]], agent)
    if kind == "tool":
        tools = [_source(i, text) for i, text in enumerate(texts)]
        agent = Agent(provider=_model(token, noise, model_rng, tools=n), model="m", tools=tools)
        ids = [f"source_{i}" for i in range(n)]
        return Planted(kind, ids[culprit], [i for i in ids if i != ids[culprit]], agent)
    if kind == "composition":
        context = [define_fact(id=f"s{i}", data=t) for i, t in enumerate(texts)]
        first = Agent(provider=_model(token, noise, model_rng), model="m", context=context,
                      name="first")
        second = Agent(provider=mock(respond=lambda r: "Report -> " + r.messages[-1]["content"]),
                       model="m", name="second")
        pipeline = Sequence(("first", first), ("second", second))
        ids = [f"s{i}" for i in range(n)]
        return Planted(kind, ids[culprit], [i for i in ids if i != ids[culprit]], pipeline)
    raise ValueError(kind)


def _source(index: int, text: str) -> Any:
    def lookup(ticket: int) -> str:
        return text

    return tool(lookup, name=f"source_{index}", description=f"Source {index} for a ticket.")


def is_wrong(answer: str) -> bool:
    return "WRONG" in answer


async def explained(planted: Planted, *, attempts: int = 50) -> Any:
    """The first run of the scenario that answered wrong (the run a user would explain)."""
    for _ in range(attempts):
        result = await planted.runner.run(QUESTION)
        if is_wrong(result.content):
            planted.result = result
            return result
    raise AssertionError(f"{planted.kind} scenario never answered wrong")
