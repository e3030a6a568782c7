"""Text rendering of shop pages.

Every page starts with the shopper's instruction and ends with the list of actions the agent
may take there (``search[...]`` on the search page, ``click[element]`` elsewhere); clickable
elements are also shown in square brackets where they appear on the page.
"""

from __future__ import annotations

from rockroll.envs.webshop.catalog import Goal, Product
from rockroll.envs.webshop.pages import (
    BACK,
    BUY,
    NEXT,
    PREV,
    SECTIONS,
    Page,
    clickables,
    item_options,
    num_pages,
    page_asins,
    page_size,
    result_labels,
)
from rockroll.envs.webshop.store import Shop

__all__ = ["render_page", "actions_line"]

_MAX_SECTION_CHARS = 1500


def _price(value: float) -> str:
    return f"${value:,.2f}"


def _buttons(elements: list[str]) -> str:
    return " ".join(f"[{e}]" for e in elements)


def actions_line(page: Page, shop: Shop) -> str:
    """The closing line listing the legal actions on ``page``."""
    if page["kind"] == "search":
        return "Available actions: search[<your query>]"
    if page["kind"] == "done":
        return "The episode is over."
    return "Available actions: " + ", ".join(f"click[{e}]" for e in clickables(page, shop))


def _results(page: Page, shop: Shop) -> list[str]:
    asins = page["asins"]
    if not asins:
        return [f'[Results] No product matches "{page["query"]}". Try other words.', _buttons([BACK])]
    first = (page["page"] - 1) * page_size(page) + 1
    shown = page_asins(page)
    nav = [BACK] + ([PREV] if page["page"] > 1 else []) + ([NEXT] if page["page"] < num_pages(page) else [])
    lines = [
        f'[Results] "{page["query"]}": products {first}-{first + len(shown) - 1} of {len(asins)} '
        f"(page {page['page']} of {num_pages(page)})",
        _buttons(nav),
    ]
    for asin, label in zip(shown, result_labels(page), strict=True):
        p = shop.catalog.by_asin[asin]
        rating = f" | Rating: {p.rating:.1f}" if p.rating is not None else ""
        lines.append(f"[{label}] {p.title}\n    Price: {_price(p.price)}{rating}")
    return lines


def _item(page: Page, product: Product, shop: Shop) -> list[str]:
    lines = [_buttons([BACK, PREV]), f"[Item] {product.title}", f"Price: {_price(product.price)}"]
    if product.rating is not None:
        lines[-1] += f" | Rating: {product.rating:.1f} out of 5"
    by_name: dict[str, list[str]] = {}
    for label, name, _ in item_options(shop, product.asin):
        by_name.setdefault(name, []).append(label)
    for name, labels in by_name.items():
        lines.append(f"{name}: {_buttons(labels)}")
    if product.options:
        chosen = ", ".join(f"{k} = {v}" for k, v in page["options"].items()) or "none yet"
        lines.append(f"Selected options: {chosen} (click a value to select it)")
    lines.append(_buttons([*SECTIONS, BUY]))
    return lines


def _section(page: Page, product: Product) -> list[str]:
    section = page["section"]
    lines = [_buttons([BACK, PREV]), f"[{section.capitalize()}] {product.title}"]
    if section == "description":
        text = product.description or "No description available."
        lines.append(text if len(text) <= _MAX_SECTION_CHARS else text[:_MAX_SECTION_CHARS] + " ...")
    elif section == "features":
        lines.extend([f"- {f}" for f in product.features] or ["No features listed."])
    elif product.reviews:
        lines.extend(f"- {r.rating}/5 {r.title}: {r.body}".replace(" : ", ": ") for r in product.reviews[:10])
    else:
        lines.append("No reviews yet.")
    return lines


def _done(page: Page, product: Product) -> list[str]:
    chosen = ", ".join(f"{k} = {v}" for k, v in page["options"].items())
    s = page["score"]
    return [
        f"[Purchase complete] You bought: {product.title} ({product.asin}) for {_price(product.price)}"
        + (f", with {chosen}." if chosen else "."),
        f"Your score: {s['reward']:.3f} (type {s['r_type']:.1f}, attributes {s['attr_matches']}/{s['n_attrs']}, "
        f"options {s['option_matches']}/{s['n_options']}, price {'ok' if s['price_ok'] else 'too high'}).",
    ]


def render_page(page: Page, goal: Goal, shop: Shop, feedback: str | None = None) -> str:
    """The observation text of ``page``, with an optional feedback line after the instruction."""
    lines = ["WebShop", f"Instruction: {goal.instruction}"]
    if feedback:
        lines.append(f"Note: {feedback}")
    kind = page["kind"]
    if kind == "search":
        lines.append("[Search] Type a query to find products, e.g. search[the product you want].")
    elif kind == "results":
        lines.extend(_results(page, shop))
    else:
        product = shop.catalog.by_asin[page["asin"]]
        if kind == "item":
            lines.extend(_item(page, product, shop))
        else:
            lines.extend({"section": _section, "done": _done}[kind](page, product))
    lines.append(actions_line(page, shop))
    return "\n".join(lines)
