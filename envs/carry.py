"""Carry the registrations a user made in this process into worker processes (Ray actors).

A policy loss, advantage estimator, env or expert registered by the user's own code exists only in
the process that ran the registration; a Ray worker looks it up by name and would not find it.
Every registration (:meth:`rockroll.envs.registries.Registry.add`, ``rockroll.envhub.register``)
notes where it was made (:func:`note_registration`); :func:`carried_registrations` turns the notes
into one picklable :class:`CarriedRegistrations` that the driver passes to each worker, which calls
:func:`apply_registrations` before it reads its config:

* made while an importable module was being imported (``@register_policy_loss`` at the top of
  ``my_losses.py``): the worker imports that module, from the ``sys.path`` folder it came from;
* made anywhere else (a script run as ``__main__``, a function's body): the registration itself is
  shipped by value with cloudpickle and redone in the worker. What cloudpickle cannot pickle (a
  function closing over a lock, an open file) raises :class:`CarryError` saying to move the
  registration into an importable module.

Registrations made by rockroll itself (a module of the ``rockroll`` package being imported) are
not carried: the worker imports the same modules. Folders are shared by path, so a worker on
another machine needs the module there too (Ray's ``runtime_env={"py_modules": [...]}``).
"""

from __future__ import annotations

import importlib
import sys
import sysconfig
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from rockroll.envs.errors import RockrollError

__all__ = [
    "CarriedRegistrations",
    "CarryError",
    "apply_registrations",
    "carried_registrations",
    "forget_registration",
    "note_registration",
]

_LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})


class CarryError(RockrollError, RuntimeError):
    """A registration cannot be carried to worker processes.

    Attributes:
        key: ``(what, name)`` of the registration (``("policy loss", "mine")``).
        module: the module that made it (``"__main__"``).
    """

    def __init__(self, key: tuple[str, str], module: str, reason: str) -> None:
        self.key, self.module = key, module
        super().__init__(
            f"{key[0]} {key[1]!r}, registered in {module}, cannot be sent to the worker processes ({reason}): "
            "move the registration to the top level of an importable module (e.g. my_plugins.py on sys.path) and "
            "import that module before building the config"
        )


@dataclass(frozen=True)
class _Note:
    module: str  # the module whose code made the registration
    at_import: bool  # made by that module's top level while it was imported
    replay: Callable[[], object]  # redoes the registration


@dataclass(frozen=True)
class CarriedRegistrations:
    """What a worker needs to redo this process's registrations (see the module docstring).

    Attributes:
        paths: ``sys.path`` folders the modules below (and functions pickled by reference) import from.
        modules: modules to import; importing them registers their entries again.
        replays: cloudpickled list of calls that redo the other registrations (``b""``: none).
    """

    paths: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    replays: bytes = b""


_notes: dict[tuple[str, str], _Note] = {}
_lock = threading.Lock()


def _registering_frame(depth: int) -> tuple[str, bool, str]:
    """``(module, at_import, file)`` of the code that made the registration: walking out from the caller
    ``depth`` frames up, the first frame that is a module's top level or lies outside the rockroll package."""
    frame: FrameType | None = sys._getframe(depth + 1)
    while frame is not None:
        spec = frame.f_globals.get("__spec__")  # `python -m rockroll.cli` runs rockroll.cli.__main__ as __main__
        name = str(getattr(spec, "name", None) or frame.f_globals.get("__name__", "__main__"))
        top = frame.f_code.co_name == "<module>"
        if top or not (name == "rockroll" or name.startswith("rockroll.")):
            return name, top, frame.f_code.co_filename
        frame = frame.f_back
    return "__main__", False, ""


def note_registration(what: str, name: str, replay: Callable[[], object], *, depth: int = 1) -> None:
    """Record that ``name`` was registered into ``what`` (``"policy loss"``); ``replay()`` redoes it.

    ``depth``: frames between the caller and the registry's public function (1: the caller's caller
    made the registration). Registrations of the rockroll package itself, and those made by library
    code at run time (a server's handler thread), are not recorded.
    """
    module, at_import, file = _registering_frame(depth + 1)
    if module == "rockroll" or module.startswith("rockroll."):
        return
    if not at_import and file.startswith(_LIBRARY_DIRS):
        return
    with _lock:
        _notes[(what, name)] = _Note(module, at_import, replay)


def forget_registration(what: str, name: str) -> None:
    """Drop the note of ``name`` in ``what`` (it was unregistered)."""
    with _lock:
        _notes.pop((what, name), None)


def _import_root(module: str) -> str | None:
    """The ``sys.path`` folder ``module`` was imported from (None: not known, e.g. a namespace package)."""
    mod = sys.modules.get(module)
    file = getattr(mod, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve().parent
    for _ in range(module.count(".") + (Path(file).name == "__init__.py")):
        path = path.parent
    return str(path)


def _dumps(replays: list[Callable[[], object]]) -> bytes:
    try:
        cloudpickle = importlib.import_module("cloudpickle")
    except ImportError:  # Ray vendors it
        cloudpickle = importlib.import_module("ray.cloudpickle")
    return bytes(cloudpickle.dumps(replays))


def carried_registrations() -> CarriedRegistrations:
    """This process's registrations, ready to send to workers; :class:`CarryError` when one cannot be pickled."""
    with _lock:
        notes = dict(_notes)
    paths: list[str] = []
    modules: list[str] = []
    replays: list[Callable[[], object]] = []
    for key, note in notes.items():
        by_import = note.at_import and note.module != "__main__" and note.module in sys.modules
        if by_import and note.module not in modules:
            modules.append(note.module)
        if not by_import:
            try:
                _dumps([note.replay])
            except Exception as e:  # noqa: BLE001 - cloudpickle raises many kinds; each is reported the same way
                raise CarryError(key, note.module, f"{type(e).__name__}: {e}") from e
            replays.append(note.replay)
        root = _import_root(note.module) if note.module != "__main__" else None
        if root and root not in paths:
            paths.append(root)
    return CarriedRegistrations(tuple(paths), tuple(modules), _dumps(replays) if replays else b"")


def apply_registrations(carried: CarriedRegistrations | None) -> None:
    """Redo the driver's registrations in this (worker) process: extend ``sys.path``, import, replay."""
    if carried is None:
        return
    for root in carried.paths:
        if root not in sys.path:
            sys.path.append(root)
    for module in carried.modules:
        importlib.import_module(module)
    if carried.replays:
        import pickle

        replays: list[Callable[[], Any]] = pickle.loads(carried.replays)  # noqa: S301 - our own driver's bytes
        for replay in replays:
            replay()
