"""The trace contract: every name a run records, declared once, with the kind of content it holds.

An agent run is a flowchart run, so what it records is run state written under string keys by
named stages. Explain, compose, the report, redaction and exporters all read those names; they
read them from here, never as a literal (a test walks every module and fails on one). Each
declaration says what the value is and which *kinds of content* it can hold, so a redaction
policy can name kinds (``"tool_args"``) instead of internal keys, and a key added later of a
redacted kind is covered without anyone listing it.

Three sorts of names:

* **keys** — run-state keys (``HISTORY``), and key *families* whose suffix is a memory id or an
  index (``MEMORY_RECALL.of("chat")`` is ``"memory_recall_chat"``);
* **stage ids** — the stable ids of the agent loop's stages (``CALL_LLM``) and of the memory
  subflows mounted in it (``MEMORY_READ.of("chat")``);
* **id prefixes** — the leading part of an injection id that says where it came from
  (``MEMORY_INJECTION.of("chat")`` is ``"memory:chat"``; ``.strip()`` takes it off again).

This module imports nothing from the package: every layer may import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Final, Literal, get_args

__all__ = [
    "CONTENT_KINDS",
    "ContentKind",
    "Shape",
    "KeyFamily",
    "KeySpec",
    "Prefix",
    "StageFamily",
    "declared_families",
    "declared_key",
    "declared_keys",
    "declared_prefixes",
    "declared_stage_families",
    "declared_stage_ids",
    "is_declared_key",
    "keys_of_kinds",
    "memory_entry_id",
    "without_timings",
]

ContentKind = Literal[
    "user_text",       # what a person typed
    "model_text",      # what a model wrote (answers, critiques, plans)
    "tool_args",       # the arguments a model passed to a tool
    "tool_results",    # what a tool returned
    "memory_content",  # entries recalled from or written to a memory store
    "documents",       # retrieved document passages (RAG)
    "context",         # developer-declared context: the system prompt, facts, skills, steering
    "configuration",   # ids, counters, settings and bookkeeping: no one's words
    "timing",          # how long something took: differs on every run, so comparisons drop it
]
CONTENT_KINDS: Final[frozenset[str]] = frozenset(get_args(ContentKind))

Shape = Literal["value", "messages", "recall", "tool_calls", "state", "slot_rows", "delivery"]
"""How a value is laid out, so redaction can mask its content and keep its structure:
``messages`` a list of chat messages, ``recall`` a memory's recall (text, pieces, entry ids),
``tool_calls`` a list of ``{id, name, args}``, ``state`` a mapping of run-state keys,
``slot_rows`` the system prompt's rows (their content ``hash`` masked), ``delivery`` the delivered
messages' rows (their content ``key`` masked), ``value`` anything else (masked whole)."""

_CONVERSATION: Final = ("user_text", "model_text", "tool_args", "tool_results",
                        "memory_content", "documents", "context")
"""A conversation carries everything: messages, tool calls, results and injected messages."""


class KeySpec:
    """One declared run-state key: its name, the kinds of content it holds, and what it is.

    A plain class, not a dataclass: about a hundred are made at import, on every cold start.
    """

    __slots__ = ("derived_from", "doc", "kinds", "name", "shape")

    name: str
    kinds: frozenset[str]
    doc: str
    shape: Shape
    derived_from: frozenset[str]
    """Kinds of content a value here is computed from (a hash of a prompt piece): redacting
    one of them masks what was derived, so no fingerprint of redacted content is recorded."""

    def __init__(self, name: str, kinds: frozenset[str], doc: str, shape: Shape = "value",
                 derived_from: frozenset[str] = frozenset()) -> None:
        self.name = name
        self.kinds = kinds
        self.doc = doc
        self.shape = shape
        self.derived_from = derived_from

    def __repr__(self) -> str:
        return f"KeySpec({self.name!r}, kinds={sorted(self.kinds)}, shape={self.shape!r})"


class KeyFamily:
    """Keys built from a prefix and a suffix (a memory id, an index): ``prefix + suffix``."""

    __slots__ = ("doc", "kinds", "prefix", "shape")

    prefix: str
    kinds: frozenset[str]
    doc: str
    shape: Shape

    def __init__(self, prefix: str, kinds: frozenset[str], doc: str,
                 shape: Shape = "value") -> None:
        self.prefix = prefix
        self.kinds = kinds
        self.doc = doc
        self.shape = shape

    def __repr__(self) -> str:
        return f"KeyFamily({self.prefix!r}, kinds={sorted(self.kinds)}, shape={self.shape!r})"

    def of(self, suffix: object) -> str:
        """The family's key for ``suffix``."""
        return f"{self.prefix}{suffix}"

    def matches(self, key: str) -> bool:
        return key.startswith(self.prefix) and len(key) > len(self.prefix)

    def suffix(self, key: str) -> str:
        """What follows the prefix (the memory id of ``memory_recall_chat``)."""
        if not self.matches(key):
            raise ValueError(f"{key!r} is not a key of the {self.prefix!r} family")
        return key[len(self.prefix):]


class StageFamily:
    """Stage ids built from a prefix and a suffix (``memory_read_chat``)."""

    __slots__ = ("doc", "prefix")

    prefix: str
    doc: str

    def __init__(self, prefix: str, doc: str) -> None:
        self.prefix = prefix
        self.doc = doc

    def __repr__(self) -> str:
        return f"StageFamily({self.prefix!r})"

    def of(self, suffix: object) -> str:
        return f"{self.prefix}{suffix}"

    def matches(self, stage_id: str) -> bool:
        return stage_id.startswith(self.prefix) and len(stage_id) > len(self.prefix)


class Prefix:
    """The leading part of an id that names its source (``memory:`` in ``memory:chat#msg-1-0``)."""

    __slots__ = ("doc", "text")

    text: str
    doc: str

    def __init__(self, text: str, doc: str) -> None:
        self.text = text
        self.doc = doc

    def __repr__(self) -> str:
        return f"Prefix({self.text!r})"

    def of(self, rest: object) -> str:
        return f"{self.text}{rest}"

    def matches(self, value: str) -> bool:
        return value.startswith(self.text)

    def strip(self, value: str) -> str:
        """``value`` without the prefix; a value without it is an error, never passed through."""
        if not self.matches(value):
            raise ValueError(f"{value!r} does not start with {self.text!r}")
        return value[len(self.text):]


_KEYS: dict[str, KeySpec] = {}
_FAMILIES: list[KeyFamily] = []
_STAGES: dict[str, str] = {}
_STAGE_FAMILIES: list[StageFamily] = []
_PREFIXES: list[Prefix] = []


def _kinds(kinds: Iterable[str]) -> frozenset[str]:
    found = frozenset(kinds)
    unknown = found - CONTENT_KINDS
    if unknown or not found:
        raise ValueError(f"kinds {sorted(unknown) or '(none)'} are not content kinds")
    return found


def _key(name: str, *kinds: str, doc: str, shape: Shape = "value",
         derived_from: tuple[str, ...] = ()) -> str:
    if name in _KEYS:
        raise ValueError(f"run-state key {name!r} is declared twice")
    derived = _kinds(derived_from) if derived_from else frozenset()
    _KEYS[name] = KeySpec(name, _kinds(kinds), doc, shape, derived)
    return name


def _family(prefix: str, *kinds: str, doc: str, shape: Shape = "value") -> KeyFamily:
    family = KeyFamily(prefix, _kinds(kinds), doc, shape)
    _FAMILIES.append(family)
    return family


def _stage(stage_id: str, doc: str) -> str:
    if stage_id in _STAGES:
        raise ValueError(f"stage id {stage_id!r} is declared twice")
    _STAGES[stage_id] = doc
    return stage_id


def _stage_family(prefix: str, doc: str) -> StageFamily:
    family = StageFamily(prefix, doc)
    _STAGE_FAMILIES.append(family)
    return family


def _prefix(text: str, doc: str) -> Prefix:
    prefix = Prefix(text, doc)
    _PREFIXES.append(prefix)
    return prefix


# --------------------------------------------------------------------------- run arguments

MESSAGE: Final = _key("message", "user_text", doc="the user's message a run was started with")
RESUME_STATE: Final = _key("resume_state", *_CONVERSATION,
                           doc="a failed run's last committed state, replayed by resume_on_error",
                           shape="state")
RESUMED_FROM: Final = _key("resumed_from", "configuration",
                           doc="the run id a resumed run continues")

# --------------------------------------------------------------------------- the agent's turn

USER_MESSAGE: Final = _key("user_message", "user_text", doc="this turn's user message")
HISTORY: Final = _key("history", *_CONVERSATION,
                      doc="the conversation sent to the model: messages, tool calls and results",
                      shape="messages")
TURN: Final = _key("turn", "configuration", doc="the turn number, resolved once in Seed")
ITERATION: Final = _key("iteration", "configuration", doc="the loop's iteration, from 1")
MAX_ITERATIONS: Final = _key("max_iterations", "configuration", doc="the iteration budget")
INPUT_TOKENS: Final = _key("input_tokens", "configuration", doc="input tokens so far")
OUTPUT_TOKENS: Final = _key("output_tokens", "configuration", doc="output tokens so far")
IDENTITY: Final = _key("identity", "configuration",
                       doc="the memory identity (tenant, principal, conversation) of the run")
TURN_CLAIM: Final = _key("turn_claim", "configuration",
                         doc="the owner token under which this run holds its turn's claim")
ROUTE_DECISIONS: Final = _key("route_decisions", "configuration",
                              doc="this turn's route choices, kept for a causal snapshot")
ANSWER_SCRIPTS: Final = _key("answer_scripts", "configuration",
                             doc="which fenced code blocks of the answer are this turn's programs")
ACTIVATED_SKILLS: Final = _key("activated_skills", "configuration",
                               doc="ids of the skills the model activated so far")
TOOL_RESULTS: Final = _key("tool_results", "tool_results",
                           doc="the previous tool batch's results, for on_tool_return triggers")

# --------------------------------------------------------------------------- context slots

CONTEXT_EVALUATION: Final = _key(
    "context_evaluation", "configuration",
    doc="one row per injection and recalled piece: fired or not, trigger and reason (no text)")
ACTIVE_INJECTIONS: Final = _key("active_injections", "configuration",
                                doc="ids of the injections that fired this iteration")
SKILL_STEPS: Final = _key("skill_steps", "configuration",
                          doc="where the active skill's procedure stands")
SYSTEM_PROMPT: Final = _key("system_prompt", "context", "memory_content", "documents",
                            doc="the system prompt sent to the model")
_PROMPT_CONTENT: Final = ("context", "memory_content", "documents")
SYSTEM_SLOT: Final = _key("system_slot", "configuration",
                          doc="the system prompt's pieces: source, offsets, cache, content hash",
                          shape="slot_rows", derived_from=_PROMPT_CONTENT)
DELIVERED_KEYS: Final = _key("delivered_keys", "configuration",
                             doc="content keys (hashes) of injected messages already delivered",
                             derived_from=("context", "memory_content", "documents"))
MESSAGES_DELIVERY: Final = _key(
    "messages_delivery", "configuration",
    doc="which injected messages were delivered (or deferred) this iteration, with content keys",
    shape="delivery", derived_from=("context", "memory_content", "documents"))
WINDOW: Final = _key("window", "configuration",
                     doc="which part of the history this call was sent (the window's plan)")
WINDOW_EVICTED: Final = _key("window_evicted", *_CONVERSATION,
                             doc="per call, the messages the window left out")
TOOL_SCHEMAS: Final = _key("tool_schemas", "context", doc="the tool list sent to the model")
TOOLS_SLOT: Final = _key("tools_slot", "configuration",
                         doc="the tool list's entries with their source and position")
WRAP_UP_ASKED: Final = _key("wrap_up_asked", "configuration",
                            doc="the budget ran out and the model was asked to answer")

# --------------------------------------------------------------------------- the model's answer

LLM_CONTENT: Final = _key("llm_content", "model_text", doc="the latest call's answer text")
LLM_TOOL_CALLS: Final = _key("llm_tool_calls", "tool_args",
                             doc="the tool calls the latest call asked for", shape="tool_calls")
STOP_REASON: Final = _key("stop_reason", "configuration", doc="why the latest call stopped")
FINAL_CONTENT: Final = _key("final_content", "model_text", doc="the run's answer")
STOPPED_EARLY: Final = _key("stopped_early", "configuration",
                            doc="why a run ended before the model answered, when it did")
LLM_USAGE: Final = _key("llm_usage", "configuration",
                        doc="per LLM call: model, provider, input/output/cached tokens, cost and "
                            "the prompt-cache breakpoints sent")
LLM_LATENCY: Final = _key("llm_latency_ms", "timing",
                          doc="per LLM call, its wall-clock time in milliseconds")
BUDGET_CROSSED: Final = _key("budget_crossed", "configuration",
                             doc="the token or cost budgets a run crossed: which, where, and "
                                 "whether it stopped or warned")
ROUTE_TRAIL: Final = _key("route_trail", "configuration", doc="the route choices so far")
OUTPUT_SCHEMA: Final = _key("output_schema", "context",
                            doc="the structured output asked for: the output type's name, its "
                                "JSON schema, how it was sent (mode) and the retry budget")
OUTPUT_ATTEMPTS: Final = _key("output_attempts", "model_text", "configuration",
                              doc="every answer checked against the output type: its call, its "
                                  "text, valid or not, and each validation error's field")
OUTPUT: Final = _key("output", "model_text",
                     doc="the validated structured output (JSON form) of the run's answer")

# --------------------------------------------------------------------------- tools and governance

PAUSED_TOOL_BATCH: Final = _key("paused_tool_batch", "tool_args", "tool_results",
                                doc="a tool batch paused for a check-in: calls and results so far")
PERMISSION_HALT: Final = _key("permission_halt", "tool_args", "configuration",
                              doc="the permission rule that halted the run, and its call")
ACT_LEDGER: Final = _key("act_ledger", "tool_args", "configuration",
                         doc="the act() rules' decisions, one row each")
FINDINGS_LEDGER: Final = _key("findings_ledger", "tool_args", "tool_results",
                              doc="the per-turn script ledger of the code runner")
SCRIPTS_DROPPED: Final = _key("scripts_dropped", "configuration",
                              doc="earlier turns' script text dropped from the ledger")
SUB_RUNS: Final = _key("sub_runs", "configuration",
                       doc="agents run as tools: tool call id -> the tool's name and the inner "
                           "run's id (the link from the outer call to the inner run)")
SUB_RECORDINGS: Final = _key("sub_recordings", *_CONVERSATION,
                             doc="agents run as tools: inner run id -> that run's recording "
                                 "(JSON), kept with the outer run so it explains offline")

# --------------------------------------------------------------------------- memory and RAG

NEW_MESSAGES: Final = _key("new_messages", *_CONVERSATION,
                           doc="this turn's messages, handed to the memory writes",
                           shape="messages")
RUN_EVIDENCE: Final = _key("run_evidence", "tool_args", "tool_results", "configuration",
                           doc="what a causal memory keeps of the run: tool calls, cost")
MESSAGES: Final = _key("messages", *_CONVERSATION,
                       doc="the conversation handed to a memory read (its query)",
                       shape="messages")
LOADED: Final = _key("loaded", "memory_content", doc="entries a memory read loaded")
SELECTED: Final = _key("selected", "memory_content", doc="entries a memory strategy kept")
PICK: Final = _key("pick", "memory_content", doc="the entries a memory strategy picked")
RECALL: Final = _key("recall", "memory_content", "documents",
                     doc="what a memory read recalls: text, pieces, entry ids, turns",
                     shape="recall")
RETRIEVED: Final = _key("retrieved", "memory_content", "documents",
                        doc="what a search retrieved, admitted or not, with scores")
WRITTEN: Final = _key("written", "memory_content", doc="entries a memory write stored")
SUMMARIZE: Final = _key("summarize", "memory_content", doc="the span a summary strategy folds")
NEW_MESSAGE_EMBEDDINGS: Final = _key("new_message_embeddings", "memory_content",
                                     doc="embeddings of the turn's messages (derived content)")
NEW_MESSAGE_EMBEDDING_MODEL: Final = _key("new_message_embedding_model", "configuration",
                                          doc="the embedder that made them")
PASSAGES: Final = _key("passages", "documents", doc="the passages a retrieval returned")
MEMORY_RECALL: Final = _family("memory_recall_", "memory_content", "documents",
                               doc="a memory's recall lifted into the agent's state",
                               shape="recall")
MEMORY_RETRIEVED: Final = _family("memory_retrieved_", "memory_content", "documents",
                                  doc="a memory's retrieval evidence lifted into the agent's state")

# --------------------------------------------------------------------------- compositions

ORIGINAL: Final = _key("original", "user_text", doc="the message a composition was run with")
CURRENT: Final = _key("current", "user_text", "model_text",
                      doc="what a composition hands to its next runner")
TASK: Final = _key("task", "user_text", doc="the task a pattern works on")
ITEMS: Final = _key("items", "user_text", "model_text", doc="map-reduce: the items mapped")
MAPPED: Final = _key("mapped", "model_text", doc="map-reduce: the mapped answers")
OUTPUTS: Final = _key("outputs", "model_text", doc="parallel: each branch's answer")
VOTES: Final = _key("votes", "model_text", doc="self-consistency: the samples' answers")
WINNER: Final = _key("winner", "model_text", doc="self-consistency: the winning answer")
CRITIQUE: Final = _key("critique", "model_text", doc="reflection: the critic's latest words")
ACCEPTED: Final = _key("accepted", "configuration", doc="reflection: the critic accepted")
ROUNDS: Final = _key("rounds", "configuration", doc="reflection: rounds run")
ROUND: Final = _key("round", "configuration", doc="debate: the current round")
HOPS: Final = _key("hops", "configuration", doc="swarm: hand-offs so far")
SPEAKER: Final = _key("speaker", "configuration", doc="swarm: the agent holding the floor")
FRONTIER: Final = _key("frontier", "model_text", doc="tree of thoughts: thoughts to expand")
EXPANDING: Final = _key("expanding", "model_text", doc="tree of thoughts: the thought expanded")
LEVEL: Final = _key("level", "configuration", doc="tree of thoughts: the depth reached")
CANDIDATES: Final = _key("candidates", "model_text", doc="tree of thoughts: rated thoughts")
BEST: Final = _key("best", "model_text", doc="tree of thoughts: the best thought")
BEST_SCORE: Final = _key("best_score", "configuration", doc="tree of thoughts: its rating")
THOUGHT: Final = _key("thought", "model_text", doc="tree of thoughts: one thought")
RATING: Final = _key("rating", "model_text", doc="tree of thoughts: one rating (the rater's words)")
PASSES: Final = _key("passes", "configuration", doc="loop: passes run")
LOOP_STARTED: Final = _key("loop_started", "configuration", doc="loop: when it started")
LOOP_FINISHED: Final = _key("loop_finished", "configuration", doc="loop: it ended")
PATH: Final = _key("path", "model_text", doc="tree of thoughts: the thoughts leading here")
THOUGHT_OF: Final = _family("thought:", "model_text", doc="tree of thoughts: a slot's thought")
RATING_OF: Final = _family("rating:", "model_text", doc="tree of thoughts: a slot's rating")
MAPPED_OF: Final = _family("mapped:", "model_text", doc="map-reduce: a slot's mapped answer")

# --------------------------------------------------------------------------- stage ids

SEED: Final = _stage("seed", "Seed the turn (resolve the turn number, append the user message)")
INJECTIONS: Final = _stage("injections", "Evaluate the context injections")
SYSTEM_SLOT_STAGE: Final = _stage("system_slot", "Assemble the system prompt")
MESSAGES_SLOT: Final = _stage("messages_slot", "Assemble the messages")
WINDOW_STAGE: Final = _stage("window", "Choose the part of the history the model is sent")
TOOLS_SLOT_STAGE: Final = _stage("tools_slot", "Assemble the tool list")
CALL_LLM: Final = _stage("call_llm", "Call the model")
ROUTE: Final = _stage("route", "Route on the model's answer")
TOOL_CALLS: Final = _stage("tool_calls", "Run the requested tools")
WRAP_UP: Final = _stage("wrap_up", "Ask for an answer without tools")
STEP_NUDGE: Final = _stage("step_nudge", "Remind the model of the unfinished procedure")
FINALIZE: Final = _stage("finalize", "Hand back the answer")
OUTPUT_RETRY: Final = _stage("output_retry",
                            "Send an answer that failed validation back to the model, naming "
                            "the fields (or fail when the retry budget is spent)")
MEMORY_READ: Final = _stage_family("memory_read_", "a memory's read chart, mounted after Seed")
MEMORY_WRITE: Final = _stage_family("memory_write_",
                                    "a memory's write chart, mounted after Finalize")

# --------------------------------------------------------------------------- id prefixes

MEMORY_INJECTION: Final = _prefix(
    "memory:", "an injection recalled from a memory: memory:<memory id>[#<entry id>]")
ENTRY_SEPARATOR: Final = "#"
"""Between a memory's injection id and one entry's id: ``memory:chat#msg-1-0``."""


def memory_entry_id(memory_id: str, entry_id: str) -> str:
    """The injection id of one recalled entry: ``memory:<memory id>#<entry id>``."""
    return f"{MEMORY_INJECTION.of(memory_id)}{ENTRY_SEPARATOR}{entry_id}"


# --------------------------------------------------------------------------- questions


def declared_keys() -> Iterator[KeySpec]:
    """Every declared key (families not included), in declaration order."""
    return iter(_KEYS.values())


def declared_key(name: str) -> KeySpec | KeyFamily | None:
    """The declaration of ``name``: a key, the family it belongs to, or None."""
    spec = _KEYS.get(name)
    if spec is not None:
        return spec
    return next((family for family in _FAMILIES if family.matches(name)), None)


def is_declared_key(name: str) -> bool:
    return declared_key(name) is not None


def declared_stage_ids() -> frozenset[str]:
    """Every declared stage id (families are given by ``declared_stage_families``)."""
    return frozenset(_STAGES)


def declared_stage_families() -> tuple[StageFamily, ...]:
    return tuple(_STAGE_FAMILIES)


def declared_families() -> tuple[KeyFamily, ...]:
    return tuple(_FAMILIES)


def declared_prefixes() -> tuple[Prefix, ...]:
    return tuple(_PREFIXES)


def keys_of_kinds(kinds: Iterable[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The exact keys and the family prefixes that can hold any of ``kinds`` (or a value
    derived from one, such as a content hash).

    Raises ``ValueError`` naming the valid kinds when one is unknown.
    """
    wanted = frozenset(kinds)
    unknown = wanted - CONTENT_KINDS
    if unknown:
        raise ValueError(f"unknown content kind(s) {sorted(unknown)}; the kinds are "
                         f"{sorted(CONTENT_KINDS)}")
    names = frozenset(spec.name for spec in _KEYS.values()
                      if spec.kinds & wanted or spec.derived_from & wanted)
    prefixes = tuple(family.prefix for family in _FAMILIES if family.kinds & wanted)
    return names, prefixes


def without_timings(state: Mapping[str, object]) -> dict[str, object]:
    """``state`` without its keys of kind ``timing``: what two recordings of the same work
    must agree on (a latency differs on every run, so comparisons drop it by this rule)."""
    timing, prefixes = keys_of_kinds(("timing",))
    return {key: value for key, value in state.items()
            if key not in timing and not key.startswith(prefixes)}
