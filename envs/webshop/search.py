"""Product search: a BM25 index (the ``bm25s`` library) over each product's text.

A product's document is its title, type, category path, attributes, feature bullets and
description, tokenised by :func:`rockroll.envs.webshop.text.tokenize` (the same function reads queries).
Only products sharing at least one word with the query are returned, best first; ties keep
catalogue order, so a query always gives the same list.
"""

from __future__ import annotations

import logging

import bm25s
import numpy as np

from rockroll.envs.webshop.catalog import Catalog, Product
from rockroll.envs.webshop.text import tokenize

__all__ = ["SearchEngine", "MAX_RESULTS"]

#: results kept per query (five pages of ten, as in the original WebShop)
MAX_RESULTS = 50

logging.getLogger("bm25s").setLevel(logging.WARNING)


def product_document(product: Product) -> str:
    """The text a product is indexed under."""
    return "\n".join(
        (
            product.title,
            product.product_type,
            product.product_category.replace("›", " "),
            " ".join(product.attributes),
            " ".join(product.features),
            product.description,
        )
    )


class SearchEngine:
    """BM25 ranking over a catalogue; build once, query many times (read-only after build)."""

    def __init__(self, catalog: Catalog, *, k1: float = 1.5, b: float = 0.75) -> None:
        self._asins = [p.asin for p in catalog.products]
        self._bm25 = bm25s.BM25(k1=k1, b=b)
        corpus = [tokenize(product_document(p)) or ["_empty_"] for p in catalog.products]
        self._bm25.index(corpus, show_progress=False)

    def search(self, query: str, k: int = MAX_RESULTS) -> list[str]:
        """Asins of the (at most ``k``) best products for ``query``, best first."""
        ids = list(dict.fromkeys(self._bm25.get_tokens_ids(tokenize(query))))
        if not ids or k <= 0:
            return []
        scores = np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float64)
        hits = np.flatnonzero(scores > 0)
        if hits.size > k:
            # keep every product scoring at least the k-th best, then sort those exactly
            kth = np.partition(scores[hits], hits.size - k)[hits.size - k]
            hits = hits[scores[hits] >= kth]
        order = np.lexsort((hits, -scores[hits]))[:k]
        return [self._asins[i] for i in hits[order].tolist()]
