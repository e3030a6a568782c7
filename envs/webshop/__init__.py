"""WebShop: a text web shop where the agent finds and buys the product an instruction asks for.

Modules: :mod:`~envs.webshop.catalog` (data model), :mod:`~envs.webshop.generator` (seeded
catalogue), :mod:`~envs.webshop.loader` (original WebShop files), :mod:`~envs.webshop.search`
(BM25), :mod:`~envs.webshop.store` (cached catalogue + index), :mod:`~envs.webshop.goals`,
:mod:`~envs.webshop.reward`, :mod:`~envs.webshop.pages` / :mod:`~envs.webshop.render`
(navigation and text), :mod:`~envs.webshop.env` (the env) and :mod:`~envs.webshop.oracle`.
"""

from envs.webshop.catalog import Catalog, Goal, Product, Review
from envs.webshop.env import WebShopEnv
from envs.webshop.oracle import WebShopOracle
from envs.webshop.reward import RewardBreakdown, score_purchase

__all__ = [
    "Catalog",
    "Goal",
    "Product",
    "Review",
    "RewardBreakdown",
    "WebShopEnv",
    "WebShopOracle",
    "score_purchase",
]
