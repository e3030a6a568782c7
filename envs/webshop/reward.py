"""The WebShop purchase score as pure functions (Yao et al., 2022, section 3.1).

``r = r_type * (attr_matches + option_matches + price_ok) / (n_attrs + n_options + 1)``

* ``r_type`` guards against buying the wrong kind of product. It is 1 when the product type is
  the wanted one; otherwise, following the paper's text-match heuristic: 1 when the category
  paths share two levels or more than 20% of the wanted type's words appear in the product's
  title, else 0.5; then 0.1 when under 10% of those words appear, and 0 when none do.
* an attribute matches when it is one of the product's attributes or occurs as a phrase in
  its title or feature bullets;
* an option matches when one of the selected option values equals it (after normalisation),
  or, for a product without any options, when its title states it;
* ``price_ok`` when the price is at most the goal's ceiling.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rockroll.envs.webshop.catalog import Goal, Product
from rockroll.envs.webshop.text import contains_phrase, normalize, tokenize

__all__ = ["RewardBreakdown", "type_reward", "attribute_matches", "option_matches", "score_purchase"]

_EPS = 1e-9


@dataclass(frozen=True)
class RewardBreakdown:
    """The score of a purchase and its parts (all JSON-serialisable)."""

    reward: float
    r_type: float
    attr_matches: int
    n_attrs: int
    option_matches: int
    n_options: int
    price_ok: bool

    @property
    def success(self) -> bool:
        """The purchase satisfies the goal completely."""
        return self.reward >= 1.0 - _EPS

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _category_levels(path: str) -> set[str]:
    return {normalize(level) for level in path.split("›") if normalize(level)}


def type_reward(product: Product, goal: Goal) -> float:
    """``r_type``: how surely ``product`` is the kind of thing the goal asks for (0, 0.1, 0.5 or 1)."""
    wanted = set(tokenize(goal.product_type))
    have = set(tokenize(f"{product.title} {product.product_type}"))
    title_score = len(wanted & have) / len(wanted) if wanted else 0.2
    query_match = normalize(product.product_type) == normalize(goal.product_type)
    category_match = len(_category_levels(product.product_category) & _category_levels(goal.product_category)) >= 2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if query_match:
        return r_type
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type


def attribute_matches(product: Product, goal: Goal) -> int:
    """How many of the goal's attributes the product has."""
    own = {normalize(a) for a in product.attributes}
    text = " \n ".join((product.title, *product.features))
    return sum(1 for a in goal.attributes if normalize(a) in own or contains_phrase(text, a))


def option_matches(product: Product, selected: dict[str, str], goal: Goal) -> int:
    """How many of the goal's option values are among ``selected`` (or, option-less, in the title)."""
    chosen = {normalize(v) for v in selected.values()}
    count = 0
    for value in goal.options.values():
        if normalize(value) in chosen or (not product.options and contains_phrase(product.title, value)):
            count += 1
    return count


def score_purchase(product: Product, selected: dict[str, str], goal: Goal) -> RewardBreakdown:
    """Score buying ``product`` with the ``selected`` options (name -> value) against ``goal``."""
    r_type = type_reward(product, goal)
    attrs = attribute_matches(product, goal)
    opts = option_matches(product, selected, goal)
    price_ok = product.price <= goal.price_upper + _EPS
    total = len(goal.attributes) + len(goal.options) + 1
    reward = r_type * (attrs + opts + int(price_ok)) / total
    return RewardBreakdown(
        reward=round(reward, 6),
        r_type=r_type,
        attr_matches=attrs,
        n_attrs=len(goal.attributes),
        option_matches=opts,
        n_options=len(goal.options),
        price_ok=bool(price_ok),
    )
