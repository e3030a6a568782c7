"""Names a subpackage's ``__init__`` re-exports, imported the first time they are asked for.

A subpackage lists ``name -> defining module`` and calls :func:`lazy_exports`; the two functions it
returns become the package's module-level ``__getattr__`` and ``__dir__``, so importing one submodule
(``rockroll.agentrl.sources.base``) does not load its siblings.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, lazy: Mapping[str, str], exported: Sequence[str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: each name of ``lazy`` loads from its module once."""

    def __getattr__(name: str) -> object:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exported))

    return __getattr__, __dir__
