"""Navigation: the pages of the shop, what can be clicked on each, and where a click leads.

The browser state is a stack of page dicts (plain JSON); the current page is the last one.

* ``{"kind": "search"}``: the search bar (``search[...]`` is accepted only here);
* ``{"kind": "results", "query": q, "page": n, "asins": [...]}``: ten results per page (or
  ``"size"`` of them when the page carries that key), ``next >`` / ``< prev`` turn pages, an asin
  opens the item (``"labels": "position"``: the results are labelled ``result 1``, ``result 2``, ...
  on each page instead of by asin);
* ``{"kind": "item", "asin": a, "options": {name: value}}``: clicking an option value selects
  it; ``description`` / ``features`` / ``reviews`` open a sub-page; ``buy now`` buys;
* ``{"kind": "section", "asin": a, "section": s}``: a sub-page; ``< prev`` returns to the item;
* ``{"kind": "done", ...}``: after buying (nothing clickable).

``back to search`` returns to a fresh search page from anywhere. Elements are matched
case-insensitively with spaces collapsed.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Required, TypedDict, cast

from rockroll.envs.webshop.catalog import Product
from rockroll.envs.webshop.search import MAX_RESULTS
from rockroll.envs.webshop.store import Shop

__all__ = [
    "Page",
    "BACK",
    "NEXT",
    "PREV",
    "BUY",
    "SECTIONS",
    "PAGE_SIZE",
    "page_size",
    "result_labels",
    "LABEL_KINDS",
    "canonical",
    "search_page",
    "option_elements",
    "clickables",
    "do_search",
    "do_click",
    "check_stack",
    "copy_page",
    "item_options",
]

BACK, NEXT, PREV, BUY = "back to search", "next >", "< prev", "buy now"
SECTIONS = ("description", "features", "reviews")
PAGE_SIZE = 10
#: how results are labelled: by their asin (the original shop) or by their position on the page
LABEL_KINDS = ("asin", "position")
_RESERVED = frozenset((BACK, NEXT, PREV, BUY, *SECTIONS))


class Page(TypedDict, total=False):
    """One page of the stack (the kinds and their keys are listed above); ``kind`` is always there."""

    kind: Required[str]
    query: str
    page: int
    asins: list[str]
    size: int
    labels: str
    asin: str
    options: dict[str, str]
    section: str
    score: dict[str, Any]  # a bought page's Score.to_dict() (rockroll.envs.webshop.reward)


_KINDS = frozenset(("search", "results", "item", "section", "done"))


def canonical(element: str) -> str:
    """The form elements are compared in: lower case, single spaces, outer brackets dropped."""
    text = " ".join(element.lower().split())
    while len(text) >= 2 and text[0] == "[" and text[-1] == "]":
        text = text[1:-1].strip()
    return text


def search_page() -> Page:
    return {"kind": "search"}


def page_size(page: Page) -> int:
    """How many results a results page shows at once (``PAGE_SIZE`` unless the page says otherwise)."""
    return int(page.get("size", PAGE_SIZE))


def num_pages(page: Page) -> int:
    """How many result pages a results page has (at least one)."""
    return max(1, math.ceil(len(page["asins"]) / page_size(page)))


def page_asins(page: Page) -> list[str]:
    """The asins shown on the current results page."""
    size = page_size(page)
    start = (page["page"] - 1) * size
    return page["asins"][start : start + size]


def result_labels(page: Page) -> list[str]:
    """The clickable labels of the results shown on ``page``, in the order of :func:`page_asins`."""
    shown = page_asins(page)
    if page.get("labels", "asin") == "position":
        return [f"result {i + 1}" for i in range(len(shown))]
    return [a.lower() for a in shown]


def option_elements(product: Product) -> list[tuple[str, str, str]]:
    """``(element, option name, value)`` for each option value of ``product``.

    The element is the value itself, or ``"name: value"`` when the bare value would clash with
    a navigation element or with a value of another option.
    """
    counts: dict[str, int] = {}
    for values in product.options.values():
        for v in values:
            counts[canonical(v)] = counts.get(canonical(v), 0) + 1
    out = []
    for name, values in product.options.items():
        for v in values:
            c = canonical(v)
            label = c if counts[c] == 1 and c not in _RESERVED else canonical(f"{name}: {v}")
            out.append((label, name, v))
    return out


def item_options(shop: Shop, asin: str) -> list[tuple[str, str, str]]:
    """:func:`option_elements` of product ``asin``, memoised in the shop."""
    key = ("options", asin)
    found = shop.memo.get(key)
    if found is None:
        found = shop.memo[key] = option_elements(shop.catalog.by_asin[asin])
    return found


def copy_page(page: Page) -> Page:
    """A copy of ``page`` deep enough for navigation (its dicts and lists are copied once)."""
    copied = {k: dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v for k, v in page.items()}
    return cast(Page, copied)


def clickables(page: Page, shop: Shop) -> list[str]:
    """The elements that can be clicked on ``page``, in display order."""
    kind = page["kind"]
    if kind == "results":
        out = [BACK]
        if page["page"] > 1:
            out.append(PREV)
        if page["page"] < num_pages(page):
            out.append(NEXT)
        return out + result_labels(page)
    if kind == "item":
        return [BACK, PREV, *(label for label, _, _ in item_options(shop, page["asin"])), *SECTIONS, BUY]
    if kind == "section":
        return [BACK, PREV]
    return []


def do_search(stack: list[Page], query: str, shop: Shop, size: int = PAGE_SIZE, labels: str = "asin") -> list[Page]:
    """The stack after searching ``query`` from the search page (``size`` results per page, labelled ``labels``)."""
    asins = shop.engine.search(query, MAX_RESULTS)
    page: Page = {"kind": "results", "query": query, "page": 1, "asins": asins}
    if size != PAGE_SIZE:
        page["size"] = size
    if labels != "asin":
        page["labels"] = labels
    return [*map(copy_page, stack), page]


def do_click(stack: list[Page], element: str, shop: Shop) -> list[Page]:
    """The stack after clicking ``element`` (one of the current clickables; ``buy now`` excluded)."""
    stack = [copy_page(p) for p in stack]
    page = stack[-1]
    if element == BACK:
        return [search_page()]
    if page["kind"] == "results":
        if element == NEXT:
            page["page"] += 1
        elif element == PREV:
            page["page"] -= 1
        else:
            asin = next(a for a, label in zip(page_asins(page), result_labels(page), strict=True) if label == element)
            stack.append({"kind": "item", "asin": asin, "options": {}})
        return stack
    if element == PREV:
        return stack[:-1]
    if page["kind"] == "item":
        if element in SECTIONS:
            stack.append({"kind": "section", "asin": page["asin"], "section": element})
            return stack
        for label, name, value in item_options(shop, page["asin"]):
            if label == element:
                page["options"][name] = value
                return stack
    raise ValueError(f"{element!r} cannot be clicked on a {page['kind']} page")


def check_stack(stack: object, shop: Shop) -> list[Page]:
    """Validate a page stack from a snapshot (raises ``ValueError`` when it cannot be shown)."""
    if not isinstance(stack, list) or not stack:
        raise ValueError("page stack must be a non-empty list")
    for page in stack:
        if not isinstance(page, dict) or page.get("kind") not in _KINDS:
            raise ValueError(f"bad page {page!r}")
        if "asin" in page and page["asin"] not in shop.catalog.by_asin:
            raise ValueError(f"unknown asin {page['asin']!r}")
        if page["kind"] == "results":
            size = page.get("size", PAGE_SIZE)
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(f"results page size {size!r} must be a positive int")
            if page.get("labels", "asin") not in LABEL_KINDS:
                raise ValueError(f"results labels {page['labels']!r} must be one of {LABEL_KINDS}")
            if not all(a in shop.catalog.by_asin for a in page["asins"]):
                raise ValueError("unknown asin in results")
            if not 1 <= int(page["page"]) <= num_pages(cast(Page, page)):
                raise ValueError(f"results page {page['page']} out of range")
        if page["kind"] == "item" and not isinstance(page.get("options"), dict):
            raise ValueError("item page needs an options dict")
    return copy.deepcopy(stack)
