"""Read catalogues and goals in the original WebShop file formats.

Product file: a JSON list of products, each a dict with (all but ``asin`` and a name optional)

* ``asin``; ``name`` (or ``title``, or a title inside ``product_information``);
* ``category`` (department), ``product_category`` (``"A › B › C"``), ``query`` (product type);
* ``full_description``; ``small_description`` and/or ``feature`` (bullets: a list or a string);
* ``pricing`` (``"$15.99"``, ``"$10.99 - $15.99"``, a number or a list of those; the lowest
  price is used); ``customization_options`` (``{"color": [{"value": "black", ...}, ...]}`` or
  plain value lists); ``attributes`` (list of phrases); ``Reviews``/``reviews``;
  ``average_rating``; ``product_information`` (shown with the description).

Products without an asin, a name or a readable price are skipped.

Goal/attribute file: a JSON dict ``asin -> entry`` (or ``asin -> [entry, ...]``), or a list of
entries carrying an ``asin``. An entry's ``attributes`` are added to that product; an entry
with ``instruction``, ``instruction_attributes`` or ``instruction_options`` also becomes a goal
(options as ``{name: value}`` or a list of values; the price ceiling from ``price_upper``, from
"price lower than N dollars" in the instruction, or 10-60% above the product's price).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from rockroll.envs.errors import EnvConfigError
from rockroll.envs.webshop.catalog import Catalog, Goal, Product, Review
from rockroll.envs.webshop.goals import build_goal, parse_price_upper, price_ceiling
from rockroll.envs.webshop.text import normalize

__all__ = ["load_products", "load_catalog_file"]

_ENV = "WebShopEnv"
_NUMBER_RE = re.compile(r"\d[\d,]*(?:\.\d+)?")
_TITLE_KEYS = ("title", "Title", "name", "Name", "product_name")


def _read_json(path: str | Path, param: str) -> Any:
    p = Path(path)
    if not p.is_file():
        raise EnvConfigError(f"{param}: no such file {str(p)!r}", env=_ENV, param=param)
    try:
        with p.open(encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise EnvConfigError(f"{param}: cannot read {str(p)!r} as JSON: {e}", env=_ENV, param=param) from e


def _as_list(value: object) -> list[Any]:
    if value is None or value == "":
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _parse_price(value: object) -> float | None:
    prices = []
    for item in _as_list(value):
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            prices.append(float(item))
        elif isinstance(item, str):
            prices.extend(float(m.replace(",", "")) for m in _NUMBER_RE.findall(item))
    prices = [p for p in prices if np.isfinite(p) and p > 0]
    return round(min(prices), 2) if prices else None


def _parse_options(value: object) -> dict[str, tuple[str, ...]]:
    options: dict[str, tuple[str, ...]] = {}
    if not isinstance(value, dict):
        return options
    for name, entries in value.items():
        values = []
        for e in _as_list(entries):
            v = e.get("value") if isinstance(e, dict) else e
            if isinstance(v, (str, int, float)) and str(v).strip():
                values.append(str(v).strip().lower())
        if values:
            options[str(name).strip().lower()] = tuple(dict.fromkeys(values))
    return options


def _parse_reviews(value: object) -> tuple[Review, ...]:
    out = []
    for r in _as_list(value):
        if not isinstance(r, dict):
            continue
        score = _parse_price(r.get("score", r.get("rating", r.get("stars"))))
        body = str(r.get("body") or r.get("review") or r.get("text") or "").strip()
        out.append(Review(int(round(score or 0)), str(r.get("title") or "").strip(), body))
    return tuple(out)


def _parse_product(raw: object) -> Product | None:
    if not isinstance(raw, dict):
        return None
    found = raw.get("product_information")
    info: dict[str, Any] = found if isinstance(found, dict) else {}
    title = raw.get("name") or raw.get("title") or next((info[k] for k in _TITLE_KEYS if info.get(k)), "")
    asin, price = str(raw.get("asin") or "").strip(), _parse_price(raw.get("pricing", raw.get("price")))
    if not asin or not isinstance(title, str) or not title.strip() or price is None:
        return None
    path = str(raw.get("product_category") or "").strip()
    levels = [x.strip() for x in path.split("›") if x.strip()]
    category = str(raw.get("category") or (levels[0] if levels else "misc")).strip()
    product_type = str(raw.get("query") or (levels[-1] if levels else category)).strip().lower()
    description = str(raw.get("full_description") or raw.get("description") or "").strip()
    details = [f"{k}: {v}" for k, v in info.items() if k not in _TITLE_KEYS and isinstance(v, (str, int, float))]
    if details:
        description = (description + "\nProduct information: " + "; ".join(details)).strip()
    features = [str(f).strip() for f in _as_list(raw.get("small_description")) + _as_list(raw.get("feature"))]
    rating = _parse_price(raw.get("average_rating", raw.get("rating")))
    return Product(
        asin=asin,
        title=title.strip(),
        category=category,
        product_category=path or category,
        product_type=product_type,
        price=price,
        description=description,
        features=tuple(dict.fromkeys(f for f in features if f)),
        attributes=tuple(str(a).strip().lower() for a in _as_list(raw.get("attributes")) if str(a).strip()),
        options=_parse_options(raw.get("customization_options")),
        reviews=_parse_reviews(raw.get("Reviews", raw.get("reviews"))),
        rating=None if rating is None else min(rating, 5.0),
    )


def load_products(path: str | Path, limit: int | None = None) -> list[Product]:
    """Products of a WebShop product file (the first ``limit`` usable ones; duplicates dropped)."""
    data = _read_json(path, "catalog_path")
    if not isinstance(data, list):
        raise EnvConfigError("catalog_path: expected a JSON list of products", env=_ENV, param="catalog_path")
    products: dict[str, Product] = {}
    for raw in data:
        product = _parse_product(raw)
        if product is not None and product.asin not in products:
            products[product.asin] = product
            if limit is not None and len(products) >= limit:
                break
    if not products:
        raise EnvConfigError(
            f"catalog_path: no usable product in {str(path)!r} (each needs asin, name and pricing)",
            env=_ENV,
            param="catalog_path",
        )
    return list(products.values())


def _goal_entries(data: object) -> list[tuple[str, dict[str, Any]]]:
    entries: list[tuple[str, dict[str, Any]]] = []
    if isinstance(data, dict):
        for asin, value in data.items():
            entries.extend((str(asin), e) for e in _as_list(value) if isinstance(e, dict))
    elif isinstance(data, list):
        entries.extend((str(e.get("asin", "")), e) for e in data if isinstance(e, dict))
    else:
        raise EnvConfigError("goals_path: expected a JSON dict or list of entries", env=_ENV, param="goals_path")
    return entries


def _goal_options(product: Product, value: object) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(k).strip().lower(): str(v).strip().lower() for k, v in value.items() if str(v).strip()}
    options: dict[str, str] = {}
    for v in _as_list(value):
        v = str(v).strip().lower()
        name = next((n for n, vals in product.options.items() if normalize(v) in map(normalize, vals)), "option")
        if v and name not in options:
            options[name] = v
    return options


def _make_goal(product: Product, entry: dict[str, Any], index: int) -> Goal:
    attrs = tuple(str(a).strip().lower() for a in _as_list(entry.get("instruction_attributes")) if str(a).strip())
    options = _goal_options(product, entry.get("instruction_options", entry.get("goal_options")))
    instruction = str(entry.get("instruction") or "").strip() or None
    price_upper = _parse_price(entry.get("price_upper"))
    if price_upper is None and instruction:
        price_upper = parse_price_upper(instruction)
    if price_upper is None:
        price_upper = price_ceiling(product.price, np.random.default_rng(index))
    if instruction and parse_price_upper(instruction) is None:
        instruction = f"{instruction.rstrip(' .')}, and price lower than {price_upper:.2f} dollars"
    rng = np.random.default_rng(index)
    return build_goal(
        product, attrs, options, price_upper, instruction=instruction, template=int(rng.integers(4)), style=index
    )


def load_catalog_file(
    catalog_path: str | Path, goals_path: str | Path | None = None, limit: int | None = None
) -> Catalog:
    """A :class:`Catalog` from a product file and, optionally, a goal/attribute file."""
    products = {p.asin: p for p in load_products(catalog_path, limit)}
    goals: list[Goal] = []
    if goals_path is not None:
        entries = _goal_entries(_read_json(goals_path, "goals_path"))
        for asin, entry in entries:
            if asin in products:
                extra = _as_list(entry.get("attributes")) + _as_list(entry.get("instruction_attributes"))
                products[asin] = products[asin].with_attributes(tuple(str(a).strip().lower() for a in extra))
        for index, (asin, entry) in enumerate(entries):
            keys = ("instruction", "instruction_attributes", "instruction_options", "goal_options")
            if asin in products and any(k in entry for k in keys):
                goals.append(_make_goal(products[asin], entry, index))
        if entries and not any(asin in products for asin, _ in entries):
            raise EnvConfigError(
                "goals_path: no entry refers to a product of catalog_path", env=_ENV, param="goals_path"
            )
    source = str(catalog_path) + (f" + {goals_path}" if goals_path else "")
    return Catalog(list(products.values()), goals=tuple(goals), source=source)
