"""``built_in_price`` (the remembered lookup a run without its own prices uses) is exactly
``price_for`` over the built-in table, for every kind of name."""

from __future__ import annotations

import pytest

from agentfootprint.providers._pricing import PRICES, Price, built_in_price, price_for


@pytest.mark.parametrize("model", [
    "gpt-4o", "gpt-4o-mini-2024-07-18", "claude-sonnet-4-5-20250929", "gpt-4o-latest",
    "gpt-4o-mini-extra", "mock", "", None,
])
def test_built_in_price_is_price_for_without_prices(model: str | None) -> None:
    assert built_in_price(model) is price_for(model)
    assert built_in_price(model) is price_for(model, {})
    assert built_in_price(model) is built_in_price(model)  # asked again: the same answer


def test_an_agents_own_prices_are_not_the_built_in_ones() -> None:
    own = Price(input=9.0, output=9.0)
    assert price_for("gpt-4o", {"gpt-4o": own}) is own
    assert built_in_price("gpt-4o") is PRICES["gpt-4o"]
