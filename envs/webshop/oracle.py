"""An oracle policy for WebShop: it knows the goal and plays the shop like a careful shopper.

It searches with the goal's words, opens the first listed product that can satisfy the goal
completely (type, attributes, price, and the wanted option values on offer), looking through
at most ``max_result_pages`` result pages; if none fits it searches again with the target
product's exact title. On the item page it selects the wanted options, then buys. It is used
to check that goals are reachable within the step limit, and as a reference score.
"""

from __future__ import annotations

from collections.abc import Callable

from rockroll.envs.experts import unwrapped_as
from rockroll.envs.tools import ToolAction
from rockroll.envs.webshop.catalog import Goal, Product
from rockroll.envs.webshop.env import WebShopEnv, goal_query
from rockroll.envs.webshop.pages import (
    BACK,
    BUY,
    NEXT,
    PREV,
    item_options,
    num_pages,
    option_elements,
    page_asins,
    result_labels,
)
from rockroll.envs.webshop.reward import score_purchase
from rockroll.envs.webshop.text import normalize
from rockroll.envs.webshop.tool_env import WebShopToolEnv, to_tool_call

__all__ = ["WebShopOracle", "best_options", "expert", "tool_expert"]


def best_options(product: Product, goal: Goal) -> dict[str, str]:
    """The selection of ``product``'s option values that matches the most wanted values."""
    wanted = {normalize(v) for v in goal.options.values()}
    chosen: dict[str, str] = {}
    for _, name, value in option_elements(product):
        if normalize(value) in wanted and name not in chosen:
            chosen[name] = value
    return chosen


class WebShopOracle:
    """A goal-aware policy; call :meth:`reset` at each episode start, then :meth:`act` per step.

    Args:
        max_result_pages: result pages to look through before searching by the target's title.
    """

    def __init__(self, max_result_pages: int = 2) -> None:
        self.max_result_pages = max_result_pages
        self._searches = 0

    def reset(self) -> None:
        """Forget the previous episode."""
        self._searches = 0

    @staticmethod
    def _fits(product: Product, goal: Goal) -> bool:
        return score_purchase(product, best_options(product, goal), goal).success

    def action(self, env: object) -> str:
        """The next action (without ``<answer>`` tags) for ``env`` (a WebShop env, wrapped or not)."""
        web = unwrapped_as(env, WebShopEnv)
        goal, page = web.goal, web.page
        kind = page["kind"]
        if kind == "search":
            self._searches += 1
            query = goal_query(goal) if self._searches == 1 else web.product(goal.asin).title
            return f"search[{query}]"
        if kind == "results":
            label = dict(zip(page_asins(page), result_labels(page), strict=True))
            if goal.asin in label and self._searches > 1:
                return f"click[{label[goal.asin]}]"
            for asin in label:
                if self._fits(web.product(asin), goal):
                    return f"click[{label[asin]}]"
            if page["page"] < min(num_pages(page), self.max_result_pages):
                return f"click[{NEXT}]"
            return f"click[{BACK}]"
        if kind == "item":
            product = web.product(page["asin"])
            wanted = best_options(product, goal)
            for option, name, value in item_options(web.shop, product.asin):
                if wanted.get(name) == value and page["options"].get(name) != value:
                    return f"click[{option}]"
            return f"click[{BUY}]"
        return f"click[{PREV}]"

    def act(self, env: object) -> str:
        """:meth:`action` wrapped in ``<answer>`` tags, ready for ``env.step``."""
        return f"<answer>{self.action(env)}</answer>"


def expert(env: object) -> Callable[[], str]:
    """A fresh oracle for one episode of ``env``, as a zero-argument next-action function."""
    oracle = WebShopOracle()
    return lambda: oracle.action(env)


def tool_expert(env: object) -> Callable[[], ToolAction]:
    """The oracle for ``WebShopTools-v0``: each of its actions as a turn with the one tool call that does it."""
    unwrapped_as(env, WebShopToolEnv)
    oracle, turns = WebShopOracle(), [0]

    def act() -> ToolAction:
        turns[0] += 1
        return ToolAction("", (to_tool_call(oracle.action(env), f"call{turns[0]}"),))

    return act
