"""A small name -> object registry with "did you mean" errors.

The policy losses (:mod:`rockroll.trainer.algos.losses`) and advantage estimators
(:mod:`rockroll.trainer.algos.estimators`) are each one :class:`Registry`; their decorators
(``@register_policy_loss("name")``, ``@register_advantage_estimator("name")``) add to it, and the
config's allowed names are the registry's names, so adding one is one file plus one registration.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["Registry", "UnknownNameError"]

T = TypeVar("T")


class UnknownNameError(ValueError, LookupError):
    """No entry of a registry has this name.

    Attributes:
        kind: what the registry holds (``"policy loss"``).
        name: the name asked for.
        choices: the registered names.
        suggestions: registered names close to ``name``.
    """

    def __init__(self, kind: str, name: object, choices: tuple[str, ...], field: str = "") -> None:
        self.kind, self.name, self.choices = kind, name, choices
        self.suggestions = difflib.get_close_matches(str(name), choices, n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(s) for s in self.suggestions)}?" if self.suggestions else ""
        super().__init__(f"unknown {kind} {name!r}: {field or kind} must be one of {', '.join(choices)}.{hint}")


class Registry(Generic[T]):
    """Entries by name, in registration order.

    Args:
        kind: what it holds, for messages (``"policy loss"``).
        field: the config key that names an entry (``"pg_variant"``), for messages.
    """

    def __init__(self, kind: str, field: str = "") -> None:
        self.kind = kind
        self.field = field
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T, *, override: bool = False) -> T:
        """Register ``item`` as ``name``; a taken name raises ``ValueError`` unless ``override``."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a {self.kind} needs a non-empty string name, got {name!r}")
        if name in self._items and not override:
            raise ValueError(f"{self.kind} {name!r} is already registered (pass override=True to replace it)")
        self._items[name] = item
        return item

    def remove(self, name: str) -> None:
        """Unregister ``name`` (tests use it to clean up); unknown names raise :class:`UnknownNameError`."""
        self.get(name)
        del self._items[name]

    def get(self, name: str) -> T:
        """The entry registered as ``name``; else :class:`UnknownNameError` with close names."""
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise UnknownNameError(self.kind, name, self.names(), self.field) from None

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        return tuple(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
