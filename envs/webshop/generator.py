"""Deterministic catalogue generation: ``generate_catalog(num_products, seed)``.

Products are spread evenly over the product types of :mod:`rockroll.envs.webshop.vocab`, each with a
brand, a title, 3-6 attributes (mostly the type's own, some shared by its department), 1-3
option dimensions with 2-6 values each, a price drawn log-uniformly from the type's range, a
description, feature bullets and a few reviews. The same ``(num_products, seed)`` always gives
the same catalogue.
"""

from __future__ import annotations

import math
import random

from rockroll.envs.webshop.catalog import Catalog, Product, Review
from rockroll.envs.webshop.text import is_plural, titlecase, with_article
from rockroll.envs.webshop.vocab import BRAND_HEADS, BRAND_TAILS, CATEGORIES, OPTION_POOLS, Category, TypeSpec

__all__ = ["generate_catalog", "ALL_TYPES"]

#: every (department, product type) pair, in a fixed order
ALL_TYPES: tuple[tuple[Category, TypeSpec], ...] = tuple((c, t) for c in CATEGORIES for t in c.types)

_ASIN_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
_CLAIMS = (
    "Thoughtfully made for everyday use.",
    "Checked by our quality team before it ships.",
    "A favourite with thousands of customers.",
    "Made to keep up with a busy routine.",
    "The detail that sets it apart from the rest.",
    "Exactly what you expect from {a_type} you can trust.",
)
_OPENERS = (
    "The {brand} {type} ({a1}, {a2}) is made {use}.",
    "Meet your new favourite {type}: {a1}, {a2} and ready {use}.",
    "{Brand} designed this {type} {use}, featuring {a1}.",
)
_GOOD = (
    ("Love it", "Exactly what I wanted. {This} {type} {is} {a} as promised and I would buy it again."),
    ("Great value", "Works great and arrived quickly. Very happy with {this} {type}."),
    ("Exactly as described", "Looks and feels like the pictures. Five stars from me."),
)
_MID = (
    ("Does the job", "It is fine for the price. Not amazing, but the {type} {does} what {it} should."),
    ("Okay", "Decent {type}. I expected it to be a bit more {a}, but it is acceptable."),
)
_BAD = (
    ("Not what I expected", "The {type} did not feel {a} to me. Returned {them} after a week."),
    ("Disappointed", "Arrived late and the quality is lower than I hoped."),
)


class _Rng:
    """Random draws built only on ``random.Random.random``, whose sequence Python keeps stable
    across versions for a given int seed (and which is much cheaper per call than numpy)."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed).random

    def integers(self, lo: int, hi: int | None = None) -> int:
        """An int in ``[lo, hi)`` (``[0, lo)`` when ``hi`` is None)."""
        if hi is None:
            lo, hi = 0, lo
        return lo + min(int(self.random() * (hi - lo)), hi - lo - 1)

    def uniform(self, lo: float, hi: float) -> float:
        return lo + (hi - lo) * self.random()


def _pick(rng: _Rng, items: tuple[str, ...] | list[str]) -> str:
    return items[rng.integers(len(items))]


def _sample(rng: _Rng, items: tuple[str, ...] | list[str], k: int) -> list[str]:
    """``k`` distinct items (partial Fisher-Yates), kept in their original order."""
    idx = list(range(len(items)))
    k = min(k, len(idx))
    for i in range(k):
        j = rng.integers(i, len(idx))
        idx[i], idx[j] = idx[j], idx[i]
    return [items[i] for i in sorted(idx[:k])]


def _asin(rng: _Rng, taken: set[str]) -> str:
    while True:
        code = "B0" + "".join(_ASIN_CHARS[rng.integers(len(_ASIN_CHARS))] for _ in range(8))
        if code not in taken:
            taken.add(code)
            return code


def _price(rng: _Rng, lo: float, hi: float) -> float:
    value = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    ending = float(_pick(rng, ("0.99", "0.49", "0.95", "0.0")))
    return round(max(1.0, math.floor(value)) + ending, 2)


def _attributes(rng: _Rng, cat: Category, spec: TypeSpec) -> list[str]:
    own = _sample(rng, spec.attributes, rng.integers(2, 5))
    shared = [a for a in _sample(rng, cat.attributes, rng.integers(1, 3)) if a not in own]
    return own + shared


def _options(rng: _Rng, spec: TypeSpec) -> dict[str, tuple[str, ...]]:
    options: dict[str, tuple[str, ...]] = {}
    for i, key in enumerate(spec.options):
        if i > 0 and rng.random() < 0.3:
            continue
        name, pool = OPTION_POOLS[key]
        if name in options:
            continue
        taken = {v for vals in options.values() for v in vals}
        free = [v for v in pool if v not in taken]
        if len(free) < 2:
            continue
        options[name] = tuple(_sample(rng, free, rng.integers(2, min(6, len(free)) + 1)))
    return options


def _title(rng: _Rng, brand: str, spec: TypeSpec, attrs: list[str], use: str) -> str:
    kind = titlecase(spec.name)
    a1, a2 = titlecase(attrs[0]), titlecase(attrs[1])
    form = rng.integers(3)
    if form == 0:
        return f"{brand} {kind} {titlecase(use)} - {a1}, {a2}"
    if form == 1:
        return f"{brand} {a1} {kind}, {a2}, {titlecase(use)}"
    return f"{a1} {a2} {kind} by {brand}, {titlecase(use)}"


def _grammar(noun: str) -> dict[str, str]:
    """Words that agree with ``noun`` in number, for the review templates."""
    many = is_plural(noun)
    return {
        "type": noun,
        "this": "these" if many else "this",
        "This": "These" if many else "This",
        "is": "are" if many else "is",
        "does": "do" if many else "does",
        "it": "they" if many else "it",
        "them": "them" if many else "it",
        "a_type": with_article(noun),
    }


def _reviews(rng: _Rng, spec: TypeSpec, attrs: list[str]) -> tuple[Review, ...]:
    out = []
    for _ in range(rng.integers(0, 5)):
        rating = (5, 5, 4, 4, 3, 2, 1)[rng.integers(7)]
        pool = _GOOD if rating >= 4 else _MID if rating == 3 else _BAD
        title, body = pool[rng.integers(len(pool))]
        body = body.format(a=_pick(rng, attrs), **_grammar(spec.name))
        out.append(Review(rating, title, body))
    return tuple(out)


def _product(rng: _Rng, cat: Category, spec: TypeSpec, brand: str, taken: set[str]) -> Product:
    attrs = _attributes(rng, cat, spec)
    use = _pick(rng, spec.uses)
    options = _options(rng, spec)
    opener = _pick(rng, _OPENERS).format(brand=brand, Brand=brand, type=spec.name, a1=attrs[0], a2=attrs[1], use=use)
    dims = ", ".join(f"{len(v)} {k} options" for k, v in options.items())
    blurb1, blurb2 = _sample(rng, cat.blurbs, 2)
    available = f"Available in {dims}." if dims else ""
    description = " ".join(x for x in (opener, blurb1, available, blurb2) if x)
    features = [f"{a.upper()}: {_pick(rng, _CLAIMS).format(**_grammar(spec.name))}" for a in attrs]
    features.append(f"WHAT YOU GET: 1 x {brand} {spec.name} and friendly customer service.")
    reviews = _reviews(rng, spec, attrs)
    rating = round(sum(r.rating for r in reviews) / len(reviews), 1) if reviews else round(rng.uniform(3.5, 5.0), 1)
    return Product(
        asin=_asin(rng, taken),
        title=_title(rng, brand, spec, attrs, use),
        category=cat.key,
        product_category=" › ".join(
            [cat.root] + (["Furniture"] if cat.key == "furniture" else []) + [spec.sub, titlecase(spec.name)]
        ),
        product_type=spec.name,
        price=_price(rng, *spec.price),
        description=description,
        features=tuple(features),
        attributes=tuple(attrs),
        options=options,
        reviews=reviews,
        rating=rating,
    )


def generate_catalog(num_products: int, seed: int) -> Catalog:
    """Generate ``num_products`` products from ``seed`` (same inputs, same catalogue)."""
    rng = _Rng(int(seed) * 7919 + 0x5E0B)
    brands = _sample(rng, sorted({h + t for h in BRAND_HEADS for t in BRAND_TAILS}), 60)
    taken: set[str] = set()
    order = [i % len(ALL_TYPES) for i in range(num_products)]  # even spread ...
    for i in range(len(order) - 1, 0, -1):  # ... shuffled
        j = rng.integers(i + 1)
        order[i], order[j] = order[j], order[i]
    products = []
    for type_index in order:
        cat, spec = ALL_TYPES[type_index]
        products.append(_product(rng, cat, spec, _pick(rng, brands), taken))
    return Catalog(products, source=f"generated(num_products={num_products}, seed={seed})")
