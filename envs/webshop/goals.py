"""Shopping goals: sampled from the catalogue and phrased in natural language.

A goal takes one product as its target and asks for its product type, 1-3 of its attributes,
a value for 1-2 of its options and a price ceiling a bit above its price, e.g. "i'm looking for
sulfate free and paraben free shampoo with size: 16 fl oz, and price lower than 30.00 dollars".
"""

from __future__ import annotations

import math
import re

import numpy as np

from rockroll.envs.webshop.catalog import Catalog, Goal, Product
from rockroll.envs.webshop.text import is_plural, join_words, with_article

__all__ = ["sample_goal", "build_goal", "price_ceiling", "phrase_instruction", "parse_price_upper"]

_TEMPLATES_WITH_ATTRS = (
    "i'm looking for {attrs_type}{opts}, and price lower than {price} dollars",
    "i need {a_type} that {is} {attrs}{opts}, and price lower than {price} dollars",
    "find me {attrs_type}{opts}, and price lower than {price} dollars",
    "i want to buy {a_type} which {is} {attrs}{opts}, and price lower than {price} dollars",
)
_TEMPLATES_PLAIN = (
    "i'm looking for {a_type}{opts}, and price lower than {price} dollars",
    "find me {a_type}{opts}, and price lower than {price} dollars",
)
_PRICE_RE = re.compile(r"price (?:lower|less) than \$?\s*([0-9]+(?:\.[0-9]+)?)", re.IGNORECASE)


def price_ceiling(price: float, rng: np.random.Generator) -> float:
    """A round price limit 10-60% above ``price`` (multiples of 5, 10 or 50 dollars)."""
    raw = price * rng.uniform(1.1, 1.6)
    step = 5 if raw < 20 else 10 if raw < 200 else 50
    return float(math.ceil(raw / step) * step)


def parse_price_upper(instruction: str) -> float | None:
    """The ceiling in "... price lower than 40.00 dollars", or None when the text has none."""
    m = _PRICE_RE.search(instruction)
    return float(m.group(1)) if m else None


def _options_phrase(options: dict[str, str], style: int) -> str:
    if not options:
        return ""
    if style == 0:
        return ", with " + join_words([f"{k}: {v}" for k, v in options.items()])
    return " in " + join_words([f"{v} {k}" for k, v in options.items()])


def phrase_instruction(
    product_type: str,
    attributes: tuple[str, ...],
    options: dict[str, str],
    price_upper: float,
    template: int,
    style: int,
) -> str:
    """The request in words; ``template`` and ``style`` choose among the phrasings."""
    pool = _TEMPLATES_WITH_ATTRS if attributes else _TEMPLATES_PLAIN
    attrs = join_words(list(attributes))
    return pool[template % len(pool)].format(
        attrs=attrs,
        **{"is": "are" if is_plural(product_type) else "is"},
        attrs_type=with_article(f"{attrs} {product_type}" if attrs else product_type),
        a_type=with_article(product_type),
        opts=_options_phrase(options, style % 2),
        price=f"{price_upper:.2f}",
    )


def build_goal(
    product: Product,
    attributes: tuple[str, ...],
    options: dict[str, str],
    price_upper: float,
    *,
    instruction: str | None = None,
    template: int = 0,
    style: int = 0,
) -> Goal:
    """A goal targeting ``product``; the instruction is phrased unless given."""
    if instruction is None:
        instruction = phrase_instruction(product.product_type, attributes, options, price_upper, template, style)
    return Goal(
        asin=product.asin,
        instruction=instruction,
        product_type=product.product_type,
        product_category=product.product_category,
        attributes=tuple(attributes),
        options=dict(options),
        price_upper=float(price_upper),
    )


def sample_goal(catalog: Catalog, rng: np.random.Generator) -> Goal:
    """Draw a goal: one of the catalogue's fixed goals when it has any, else a fresh one."""
    if catalog.goals:
        return catalog.goals[int(rng.integers(len(catalog.goals)))]
    product = catalog.products[int(rng.integers(len(catalog)))]
    attrs: tuple[str, ...] = ()
    if product.attributes:
        k = int(rng.integers(1, min(3, len(product.attributes)) + 1))
        picked = rng.choice(len(product.attributes), size=k, replace=False)
        attrs = tuple(product.attributes[i] for i in sorted(picked.tolist()))
    options: dict[str, str] = {}
    names = list(product.options)
    if names:
        m = int(rng.integers(1, min(2, len(names)) + 1))
        for i in sorted(rng.choice(len(names), size=m, replace=False).tolist()):
            values = product.options[names[i]]
            options[names[i]] = values[int(rng.integers(len(values)))]
    price_upper = price_ceiling(product.price, rng)
    template, style = int(rng.integers(4)), int(rng.integers(2))
    return build_goal(product, attrs, options, price_upper, template=template, style=style)
