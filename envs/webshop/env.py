"""``WebShop-v0``: find and buy the product an instruction asks for, in a text web shop.

After Yao et al., "WebShop: Towards Scalable Real-World Web Interaction with Grounded Language
Agents" (NeurIPS 2022). The shop's catalogue is fixed per env (generated from
``catalog_seed``, or read from the original WebShop files); the episode seed picks the goal.
The agent searches (``search[query]`` on the search page), browses (``click[element]``) and
ends the episode by clicking ``buy now``, scored by :mod:`rockroll.envs.webshop.reward`. Every other
step gives 0; an unparsable or unavailable action gives ``format_penalty`` and shows the page
again with a feedback line.

``info`` carries ``available_actions`` (``{"has_search_bar": bool, "clickables": [...]}``),
``page`` (the current page kind) and, after buying, ``reward_details`` and ``purchased``.
"""

from __future__ import annotations

import copy
import os
import re
from typing import Any

from rockroll.envs.core import DEFAULT_FORMAT_PENALTY, StepOutcome, TextEnv
from rockroll.envs.errors import EnvConfigError
from rockroll.envs.webshop.catalog import Goal, Product
from rockroll.envs.webshop.goals import sample_goal
from rockroll.envs.webshop.pages import (
    BUY,
    LABEL_KINDS,
    PAGE_SIZE,
    Page,
    canonical,
    check_stack,
    clickables,
    copy_page,
    do_click,
    do_search,
    search_page,
)
from rockroll.envs.webshop.render import render_page
from rockroll.envs.webshop.reward import score_purchase
from rockroll.envs.webshop.store import Shop, open_shop

__all__ = ["WebShopEnv", "Action", "goal_query"]

#: a parsed action: ("search", query) or ("click", element)
Action = tuple[str, str]

_ACTION_RE = re.compile(r"(search|click)\s*\[(.*)\]", re.IGNORECASE | re.DOTALL)
_MAX_QUERY_CHARS = 200


def goal_query(goal: Goal) -> str:
    """A plain query built from the goal's words (its attributes, then its product type)."""
    return " ".join([*goal.attributes, goal.product_type])


class WebShopEnv(TextEnv[Action]):
    """A text web shop (see the module docstring).

    Args:
        num_products: catalogue size when generating (50 to 100,000); with ``catalog_path``,
            the most products read from the file.
        catalog_seed: seed of the generated catalogue (the episode seed only picks the goal).
        catalog_path: a product file in the original WebShop format (None: generate one).
        goals_path: a goal/attribute file in the original WebShop format (needs ``catalog_path``).
        results_per_page: search results shown per results page (1 to 50; the original shop's 10).
            Fewer make shorter pages (a small model's context) and more ``next >`` clicks.
        result_labels: ``"asin"`` (the original shop: a result is clicked by its asin) or ``"position"``
            (``click[result 1]`` for the first result shown, and so on: nothing to copy letter by letter).
        format_penalty: reward for an unparsable or unavailable action.
        render_mode: None or ``"ansi"``.
    """

    MIN_PRODUCTS = 50
    MAX_PRODUCTS = 100_000
    MAX_RESULTS_PER_PAGE = 50

    instructions = (
        "You are shopping in WebShop, a text-only online store. Each page starts with an instruction "
        "describing the product to buy: its type, attributes, options (such as size or color) and a "
        "price limit. Search for it, open promising items, select the options the instruction asks for, "
        "then click 'buy now'. Buying ends the episode; the score (0 to 1) measures how well the bought "
        "product and its selected options match the instruction."
    )
    action_format = (
        "Answer with exactly one action inside <answer>...</answer>. On the search page: "
        "search[your query], e.g. <answer>search[sulfate free shampoo]</answer>. On other pages: "
        "click[element] with one of the listed elements, e.g. <answer>click[next >]</answer> or "
        "<answer>click[buy now]</answer>."
    )

    def __init__(
        self,
        *,
        num_products: int = 1000,
        catalog_seed: int = 0,
        catalog_path: str | os.PathLike[str] | None = None,
        goals_path: str | os.PathLike[str] | None = None,
        results_per_page: int = PAGE_SIZE,
        result_labels: str = "asin",
        format_penalty: float = DEFAULT_FORMAT_PENALTY,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(format_penalty=format_penalty, render_mode=render_mode)
        low = 1 if catalog_path is not None else self.MIN_PRODUCTS
        if (
            isinstance(num_products, bool)
            or not isinstance(num_products, int)
            or not low <= num_products <= self.MAX_PRODUCTS
        ):
            raise EnvConfigError(
                f"num_products must be an int from {low} to {self.MAX_PRODUCTS}, got {num_products!r}",
                env=type(self).__name__,
                param="num_products",
            )
        if isinstance(catalog_seed, bool) or not isinstance(catalog_seed, int) or catalog_seed < 0:
            raise EnvConfigError(
                f"catalog_seed must be a non-negative int, got {catalog_seed!r}",
                env=type(self).__name__,
                param="catalog_seed",
            )
        if (
            isinstance(results_per_page, bool)
            or not isinstance(results_per_page, int)
            or not 1 <= results_per_page <= self.MAX_RESULTS_PER_PAGE
        ):
            raise EnvConfigError(
                f"results_per_page must be an int from 1 to {self.MAX_RESULTS_PER_PAGE}, got {results_per_page!r}",
                env=type(self).__name__,
                param="results_per_page",
            )
        if result_labels not in LABEL_KINDS:
            raise EnvConfigError(
                f"result_labels must be one of {LABEL_KINDS}, got {result_labels!r}",
                env=type(self).__name__,
                param="result_labels",
            )
        self._results_per_page, self._result_labels = results_per_page, result_labels
        for name, value in (("catalog_path", catalog_path), ("goals_path", goals_path)):
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise EnvConfigError(
                    f"{name} must be a path or None, got {value!r}", env=type(self).__name__, param=name
                )
        if goals_path is not None and catalog_path is None:
            raise EnvConfigError(
                "goals_path refers to products of a catalogue file: give catalog_path too",
                env=type(self).__name__,
                param="goals_path",
            )
        self._shop: Shop = open_shop(
            num_products,
            catalog_seed,
            None if catalog_path is None else os.fspath(catalog_path),
            None if goals_path is None else os.fspath(goals_path),
        )
        self._goal: Goal | None = None
        self._stack: list[Page] = [search_page()]

    # ------------------------------------------------------------ accessors
    @property
    def shop(self) -> Shop:
        """The (shared, read-only) catalogue and search engine."""
        return self._shop

    @property
    def goal(self) -> Goal:
        """The current episode's goal."""
        if self._goal is None:
            raise AttributeError("no goal before reset()")
        return self._goal

    @property
    def page(self) -> Page:
        """A copy of the current page dict (see :mod:`rockroll.envs.webshop.pages`)."""
        return copy_page(self._stack[-1])

    def product(self, asin: str) -> Product:
        """The catalogue's product ``asin``."""
        return self._shop.catalog.by_asin[asin]

    # ---------------------------------------------------------------- hooks
    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        if options:
            raise EnvConfigError(
                f"WebShopEnv takes no reset options, got {sorted(options)}", env=type(self).__name__, param="options"
            )
        self._goal = sample_goal(self._shop.catalog, self.np_random)
        self._stack = [search_page()]
        return {"instruction": self._goal.instruction}

    def _classify(self, answer: str | None) -> Action | str:
        """The action ``answer`` stands for here, or why it is not a legal one."""
        if answer is None:
            return "no <answer>...</answer> block found."
        m = _ACTION_RE.fullmatch(answer.strip())
        if m is None:
            return f"'{answer[:80]}' is not an action; use search[...] or click[...]."
        verb, arg = m.group(1).lower(), m.group(2).strip()
        page = self._stack[-1]
        if verb == "search":
            if page["kind"] != "search":
                return "search is only available on the search page (click [back to search] first)."
            return ("search", arg[:_MAX_QUERY_CHARS]) if arg else "the search query is empty."
        element = canonical(arg)
        if element not in clickables(page, self._shop):
            return f"'{arg[:80]}' cannot be clicked on this page; choose one of the listed elements."
        return ("click", element)

    def _parse_action(self, answer: str) -> Action | None:
        action = self._classify(answer)
        return action if isinstance(action, tuple) else None

    def _step(self, action: Action) -> StepOutcome[Action]:
        verb, arg = action
        page = self._stack[-1]
        if verb == "click" and arg == BUY:
            product = self._shop.catalog.by_asin[page["asin"]]
            score = score_purchase(product, page["options"], self.goal)
            done: Page = {
                "kind": "done",
                "asin": product.asin,
                "options": dict(page["options"]),
                "score": score.to_dict(),
            }
            self._stack = [*self._stack, done]
            info = {"reward_details": score.to_dict(), "purchased": product.asin}
            return StepOutcome(self._render(), score.reward, True, effective=True, success=score.success, info=info)
        if verb == "search":
            new = do_search(self._stack, arg, self._shop, self._results_per_page, self._result_labels)
        else:
            new = do_click(self._stack, arg, self._shop)
        effective = new != self._stack
        self._stack = new
        return StepOutcome(self._render(), 0.0, False, effective=effective, success=False)

    def _render(self) -> str:
        if self._goal is None:
            return "WebShop: call reset() to start an episode."
        return render_page(self._stack[-1], self._goal, self._shop)

    def _invalid_observation(self, answer: str | None) -> str:
        if self._goal is None:
            return self._render()
        return render_page(
            self._stack[-1], self._goal, self._shop, feedback=f"Invalid action: {self._classify(answer)}"
        )

    def _extra_info(self) -> dict[str, Any]:
        page = self._stack[-1]
        return {
            "available_actions": {
                "has_search_bar": page["kind"] == "search",
                "clickables": clickables(page, self._shop),
            },
            "page": page["kind"],
        }

    def action_candidates(self) -> list[str]:
        page = self._stack[-1]
        if self._goal is None or page["kind"] == "done":
            return []
        if page["kind"] == "search":
            return [f"search[{goal_query(self._goal)}]"]
        return [f"click[{e}]" for e in clickables(page, self._shop)]

    def _get_state(self) -> dict[str, Any]:
        return {
            "goal": None if self._goal is None else self._goal.to_dict(),
            "stack": copy.deepcopy(self._stack),
        }

    def _set_state(self, data: dict[str, Any]) -> None:
        goal = None if data["goal"] is None else Goal.from_dict(data["goal"])
        stack = check_stack(data["stack"], self._shop)
        self._goal, self._stack = goal, stack
