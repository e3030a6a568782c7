"""Name -> entry registries with "did you mean" errors: :class:`Registry` and :class:`UnknownNameError`.

Every extension point of rockroll is one :class:`Registry`: the policy losses and advantage
estimators (:mod:`rockroll.trainer.algos`), the LLM engines (``ENGINE_KINDS``), the env sources
(``SOURCE_KINDS``), SWE-v0's executors (``EXECUTOR_KINDS``) and the sandbox backends. Adding an
entry is one registration; choosing one is one name. Whatever the registry, an unknown name raises
:class:`UnknownNameError` (or a subclass that also carries the package's error), which lists the
registered names and suggests the nearest.

An entry is any object, or a ``"module:attr"`` string imported the first time :meth:`Registry.get`
asks for it (so listing the engines imports no torch), and replaced by what it names. A registry may name an entry-point group
(:mod:`rockroll.envs.plugins`): the first time it misses a name, it imports that group's plugins,
which is how an upper layer registers into a lower one without being imported by it.

Each registration is noted by :mod:`rockroll.envs.carry`, which carries the user's own registrations
into Ray workers; a registry pickles by reference (``"module:attr"``) for that.

This module lives in the lowest layer so that every layer's registries share it; it imports only
the standard library and :mod:`rockroll.envs`' errors, plugins and carry.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, cast

from rockroll.envs.carry import forget_registration, note_registration
from rockroll.envs.errors import RockrollError
from rockroll.envs.plugins import load_plugins

__all__ = ["Registry", "UnknownNameError", "close_names", "import_target"]

T = TypeVar("T")


def close_names(name: object, choices: Iterable[object], n: int = 3) -> list[str]:
    """Up to ``n`` of ``choices`` close to ``name`` (best first), as strings: the "did you mean" list."""
    return difflib.get_close_matches(str(name), [str(c) for c in choices], n=n, cutoff=0.5)


def import_target(target: str) -> Any:
    """The object a ``"module:attr"`` string names: the module's ``ImportError`` when it does not import, an
    ``AttributeError`` naming close attributes when it has no ``attr``."""
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    found = getattr(module, attr, None)
    if found is None:
        close = close_names(attr, [n for n in dir(module) if not n.startswith("_")])
        hint = f"; did you mean {', '.join(f'{module_name}:{c}' for c in close)}?" if close else ""
        raise AttributeError(f"{module_name} has no {attr!r}{hint}")
    return found


def _restore(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(state)
    return err


class UnknownNameError(RockrollError, ValueError, LookupError):
    """No entry of a registry has this name.

    A ``ValueError`` (a bad name in a config) and a ``LookupError`` (a failed lookup) as well as a
    :class:`~rockroll.envs.errors.RockrollError`. A package's registry may raise a subclass that
    also derives from the package's error (``UnknownBackendError`` is a ``SandboxError`` too).

    Attributes:
        kind: what the registry holds (``"policy loss"``).
        name: the name asked for.
        choices: the registered names, in registration order.
        field: the config key that names an entry (``"pg_variant"``), or ``""``.
        suggestions: registered names close to ``name``, best first.
    """

    def __init__(self, kind: str, name: object, choices: Iterable[str], field: str = "", *, hint: str = "") -> None:
        self.kind, self.name, self.choices, self.field = kind, name, tuple(choices), field
        self.suggestions = close_names(name, self.choices)
        did = f" Did you mean {' or '.join(repr(s) for s in self.suggestions)}?" if self.suggestions else ""
        known = ", ".join(self.choices) or "(none registered)"
        message = f"unknown {kind} {name!r}: {field or kind} must be one of {known}.{did}"
        super().__init__(f"{message} {hint}" if hint else message)

    def __reduce__(self) -> Any:  # picklable (Ray workers, process pools) whatever a subclass's __init__ takes
        return (_restore, (type(self), self.args, self.__dict__))


class Registry(Generic[T]):
    """Entries by name, in registration order; a read-only mapping of names to entries.

    ``name in reg``, ``iter(reg)`` (the names), ``len(reg)``, ``reg[name]`` (same as :meth:`get`)
    work as on a dict, so a registry can stand wherever a dict of choices did (``OneOf(reg)`` in a
    config, ``sorted(reg)``). Changes go through :meth:`add` and :meth:`remove`.

    Args:
        kind: what it holds, for messages (``"policy loss"``).
        field: the config key that names an entry (``"pg_variant"``), for messages.
        entries: initial entries, ``name -> object`` or ``name -> "module:attr"``.
        plugins: an entry-point group whose plugins register more entries; imported (once) the
            first time :meth:`get` or :meth:`check` misses a name.
        error: builds the error for an unknown name from ``(name, choices)``; by default an
            :class:`UnknownNameError` of this ``kind`` and ``field``. Use it to raise a subclass that
            also carries the package's error.

    Example::

        ENGINES: Registry[type[LLMEngine]] = Registry("engine kind", entries={"hf": "my_pkg.hf:HFEngine"})
        ENGINES.add("mine", MyEngine)
        ENGINES.get("hf")      # imports my_pkg.hf, returns HFEngine
        ENGINES.get("hff")     # UnknownNameError: ... must be one of hf, mine. Did you mean 'hf'?
    """

    def __init__(
        self,
        kind: str,
        field: str = "",
        *,
        entries: Mapping[str, T | str] | None = None,
        plugins: str | None = None,
        error: Callable[[object, tuple[str, ...]], UnknownNameError] | None = None,
    ) -> None:
        self.kind = kind
        self.field = field
        self.plugins = plugins
        self._error = error
        self._home = str(sys._getframe(1).f_globals.get("__name__", ""))  # the module defining it, as namedtuple does
        self._items: dict[str, T | str] = {}
        for name, item in (entries or {}).items():
            self.add(name, item)

    # -------------------------------------------------------------- changes
    def add(self, name: str, item: T | str, *, override: bool = False) -> T | str:
        """Register ``item`` (an object or a lazy ``"module:attr"``) as ``name``; returns ``item``.

        A taken name raises ``ValueError`` unless ``override``.
        """
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a {self.kind} needs a non-empty string name, got {name!r}")
        if isinstance(item, str) and not all(item.partition(":")[::2]):
            raise ValueError(f"{self.kind} {name!r}: a lazy entry is 'module:attr', got {item!r}")
        if name in self._items and not override:
            raise ValueError(f"{self.kind} {name!r} is already registered (pass override=True to replace it)")
        self._items[name] = item
        note_registration(self.kind, name, functools.partial(self.add, name, item, override=True))
        return item

    def remove(self, name: str) -> None:
        """Unregister ``name`` (tests use it to clean up); unknown names raise :class:`UnknownNameError`."""
        if not self._has(name):
            raise self._unknown(name)
        del self._items[name]
        forget_registration(self.kind, name)

    # -------------------------------------------------------------- lookups
    def check(self, name: str) -> str:
        """``name`` when it is registered (imports no entry); else :class:`UnknownNameError` naming close ones."""
        if not self._has(name) and not self._load_plugins(name):
            raise self._unknown(name)
        return name

    def entry(self, name: str) -> T | str:
        """The entry as it stands: the object, or its ``"module:attr"`` string until :meth:`get` imported it."""
        return self._items[self.check(name)]

    def get(self, name: str) -> T:
        """The entry registered as ``name``; a lazy one is imported now (once; the object replaces the string).

        Unknown names raise :class:`UnknownNameError` (or this registry's subclass of it) listing
        the registered names and suggesting close ones. A lazy entry that cannot be imported
        raises the ``ImportError`` (or ``AttributeError``) and stays lazy.
        """
        item = self.entry(name)
        if isinstance(item, str):
            loaded = import_target(item)
            if self._items.get(name) is item:  # not replaced meanwhile
                self._items[name] = loaded
            return cast(T, loaded)
        return item

    __getitem__ = get

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order (plugins not yet imported are not listed)."""
        return tuple(self._items)

    keys = names

    def __contains__(self, name: object) -> bool:
        return self._has(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._items)})"

    def __reduce__(self) -> Any:
        """Pickled by reference, as ``"module:attr"``: a worker process gets its own copy of the same registry
        (:mod:`rockroll.envs.carry` redoes registrations there by calling its ``add``)."""
        module = sys.modules.get(self._home)
        attr = next((k for k, v in vars(module).items() if v is self), None) if module is not None else None
        if attr is None:
            raise TypeError(f"{self!r} is not a global of {self._home}, so another process cannot find it")
        return (import_target, (f"{self._home}:{attr}",))

    # -------------------------------------------------------------- helpers
    def _has(self, name: object) -> bool:
        try:
            return name in self._items
        except TypeError:  # unhashable
            return False

    def _load_plugins(self, name: str) -> bool:
        """Import this registry's plugins; whether ``name`` is registered now."""
        if self.plugins is None:
            return False
        load_plugins(self.plugins)
        return self._has(name)

    def _unknown(self, name: object) -> UnknownNameError:
        if self._error is not None:
            return self._error(name, self.names())
        return UnknownNameError(self.kind, name, self.names(), self.field)
