"""The shop's data model: :class:`Product`, :class:`Review`, :class:`Goal` and :class:`Catalog`.

Products and goals are immutable; a catalogue is built once (generated or loaded) and shared by
every env that uses it. Goals travel in env snapshots, so they convert to and from plain dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Review", "Product", "Goal", "Catalog"]


@dataclass(frozen=True)
class Review:
    """One customer review."""

    rating: int
    title: str
    body: str


@dataclass(frozen=True)
class Product:
    """One item of the catalogue.

    Attributes:
        asin: unique id (Amazon-style, e.g. ``B0A1B2C3D4``); its lower-case form is the item's
            clickable element on result pages.
        title: the product's name as shown in results.
        category: top-level department key (``beauty``, ``fashion`` ...).
        product_category: breadcrumb path, levels joined by `` › ``.
        product_type: what the product is (``shampoo``); the search query it was listed under.
        price: price in dollars (the lower end for a range).
        description: free text shown on the description page.
        features: bullet points shown on the features page.
        attributes: short attribute phrases the reward checks (``sulfate free``).
        options: option name -> available values, in display order (``{"size": ("small", ...)}``).
        reviews: customer reviews.
        rating: average rating out of 5, when known.
    """

    asin: str
    title: str
    category: str
    product_category: str
    product_type: str
    price: float
    description: str = ""
    features: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    reviews: tuple[Review, ...] = ()
    rating: float | None = None

    def with_attributes(self, attributes: tuple[str, ...]) -> Product:
        """A copy with ``attributes`` added (order kept, duplicates dropped)."""
        merged = tuple(dict.fromkeys(self.attributes + attributes))
        return Product(**{**self.__dict__, "attributes": merged})


@dataclass(frozen=True)
class Goal:
    """What the shopper asks for: the instruction text and what the reward checks.

    Attributes:
        asin: the product the goal was drawn from (one product that satisfies it fully).
        instruction: natural-language request shown on every page.
        product_type: the wanted product type.
        product_category: the target's breadcrumb path (used by the type match).
        attributes: wanted attributes.
        options: wanted option values, by option name.
        price_upper: the price ceiling in dollars.
    """

    asin: str
    instruction: str
    product_type: str
    product_category: str
    attributes: tuple[str, ...]
    options: dict[str, str]
    price_upper: float

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return {
            "asin": self.asin,
            "instruction": self.instruction,
            "product_type": self.product_type,
            "product_category": self.product_category,
            "attributes": list(self.attributes),
            "options": dict(self.options),
            "price_upper": self.price_upper,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Goal:
        """Inverse of :meth:`to_dict` (raises ``KeyError``/``TypeError``/``ValueError`` when malformed)."""
        options = data["options"]
        if not isinstance(options, dict):
            raise TypeError("goal options must be a dict")
        return cls(
            asin=str(data["asin"]),
            instruction=str(data["instruction"]),
            product_type=str(data["product_type"]),
            product_category=str(data["product_category"]),
            attributes=tuple(str(a) for a in data["attributes"]),
            options={str(k): str(v) for k, v in options.items()},
            price_upper=float(data["price_upper"]),
        )


class Catalog:
    """An immutable list of products with lookup by asin, plus any fixed goals.

    Args:
        products: the products; asins must be unique.
        goals: goals read from a goal file (empty: goals are sampled from the products).
        source: where the catalogue came from, for messages.
    """

    def __init__(
        self, products: list[Product] | tuple[Product, ...], goals: tuple[Goal, ...] = (), source: str = ""
    ) -> None:
        self.products: tuple[Product, ...] = tuple(products)
        self.by_asin: dict[str, Product] = {p.asin: p for p in self.products}
        if len(self.by_asin) != len(self.products):
            raise ValueError("product asins must be unique")
        self.goals: tuple[Goal, ...] = tuple(goals)
        self.source = source

    def __len__(self) -> int:
        return len(self.products)

    def __repr__(self) -> str:
        return f"Catalog({len(self)} products, {len(self.goals)} fixed goals, source={self.source!r})"
