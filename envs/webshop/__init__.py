"""WebShop: a text web shop where the agent finds and buys the product an instruction asks for.

Modules: :mod:`~rockroll.envs.webshop.catalog` (data model), :mod:`~rockroll.envs.webshop.generator` (seeded
catalogue), :mod:`~rockroll.envs.webshop.loader` (original WebShop files), :mod:`~rockroll.envs.webshop.search`
(BM25), :mod:`~rockroll.envs.webshop.store` (cached catalogue + index), :mod:`~rockroll.envs.webshop.goals`,
:mod:`~rockroll.envs.webshop.reward`, :mod:`~rockroll.envs.webshop.pages` / :mod:`~rockroll.envs.webshop.render`
(navigation and text), :mod:`~rockroll.envs.webshop.env` (the env), :mod:`~rockroll.envs.webshop.tool_env` (the env
played with tool calls, ``WebShopTools-v0``) and :mod:`~rockroll.envs.webshop.oracle`.
"""

from rockroll.envs.webshop.catalog import Catalog, Goal, Product, Review
from rockroll.envs.webshop.env import WebShopEnv
from rockroll.envs.webshop.oracle import WebShopOracle
from rockroll.envs.webshop.reward import RewardBreakdown, score_purchase
from rockroll.envs.webshop.tool_env import WebShopToolEnv

__all__ = [
    "Catalog",
    "Goal",
    "Product",
    "Review",
    "RewardBreakdown",
    "WebShopEnv",
    "WebShopOracle",
    "WebShopToolEnv",
    "score_purchase",
]
