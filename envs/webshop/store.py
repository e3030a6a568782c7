"""A catalogue and its search index, built once per process and shared: :func:`open_shop`.

Generating 1,000 products and indexing them takes a fraction of a second, but an RL run makes
many envs with the same catalogue; the cache (keyed by ``(num_products, catalog_seed)``, or by
the files' paths, sizes and modification times) makes every env after the first cheap to build
and keeps ``reset`` to sampling a goal. Cached shops are read-only.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from rockroll.envs.webshop.catalog import Catalog
from rockroll.envs.webshop.generator import generate_catalog
from rockroll.envs.webshop.loader import load_catalog_file
from rockroll.envs.webshop.search import SearchEngine

__all__ = ["Shop", "open_shop", "clear_shop_cache", "CACHE_SIZE"]

#: how many distinct shops a process keeps
CACHE_SIZE = 8

_CACHE: OrderedDict[tuple[object, ...], Shop] = OrderedDict()
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Shop:
    """A catalogue with its search engine, plus a memo for per-product derived data."""

    catalog: Catalog
    engine: SearchEngine
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)


def _file_key(path: str | None) -> tuple[object, ...]:
    if path is None:
        return (None,)
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return (real, None, None)  # the loader reports the missing file
    return (real, st.st_size, st.st_mtime_ns)


def open_shop(
    num_products: int, catalog_seed: int, catalog_path: str | None = None, goals_path: str | None = None
) -> Shop:
    """The (cached) shop for these settings; a product file caps its products at ``num_products``."""
    if catalog_path is None:
        key: tuple[object, ...] = ("generated", num_products, catalog_seed)
    else:
        key = ("file", num_products, *_file_key(catalog_path), *_file_key(goals_path))
    with _LOCK:
        shop = _CACHE.get(key)
        if shop is not None:
            _CACHE.move_to_end(key)
            return shop
    # build outside the lock: two threads may both build, and both results are identical
    if catalog_path is None:
        catalog = generate_catalog(num_products, catalog_seed)
    else:
        catalog = load_catalog_file(catalog_path, goals_path, limit=num_products)
    shop = Shop(catalog, SearchEngine(catalog))
    with _LOCK:
        _CACHE[key] = shop
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return shop


def clear_shop_cache() -> None:
    """Forget every cached shop (tests; freeing memory)."""
    with _LOCK:
        _CACHE.clear()
