"""Sandbox backends by type: one registry, ``make_backend("process")``.

Every backend has a config (a frozen dataclass, beside the backend) that declares its ``type`` and
builds the backend. Its fields are the backend's options; :func:`make_backend` fills the fields it
declares among the manager's shared settings (``state_dir``, ``docker_hosts``, ``image``), so the
manager, ``rockroll serve --backend``, the trainer's ``rollout.sandbox`` and the API settings all
accept every registered type. Adding a backend is one file plus one registration::

    @register_backend
    @dataclass(frozen=True)
    class FirecrackerConfig(BackendConfig):
        type: ClassVar[str] = "firecracker"
        state_dir: str = "/tmp/rockroll-fc"
        kernel: str = "/var/lib/firecracker/vmlinux"

        def build(self) -> SandboxBackend:
            return FirecrackerBackend(state_dir=self.state_dir, kernel=self.kernel)

then ``SandboxManager(backend="firecracker")`` or ``SandboxManager(backend=FirecrackerConfig(kernel=...))``.
The built-in types are registered as lazy ``"module:Class"`` strings, so listing them imports no
backend; this module imports nothing beyond the standard library and the sandbox errors.

Threat model: none of its own; each backend's module states how strongly it isolates.
"""

from __future__ import annotations

import abc
import dataclasses
import difflib
import importlib
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from rockroll.sandbox.errors import SandboxError

if TYPE_CHECKING:
    from rockroll.sandbox.base import SandboxBackend

__all__ = [
    "BackendConfig",
    "UnknownBackendError",
    "backend_config",
    "backend_config_class",
    "backend_names",
    "make_backend",
    "register_backend",
    "unregister_backend",
    "validate_backend_name",
]

C = TypeVar("C", bound="type[BackendConfig]")


class UnknownBackendError(SandboxError, ValueError):
    """No backend is registered under this type.

    Attributes:
        backend: the type asked for.
        choices: the registered types.
        suggestions: registered types close to ``backend``.
    """

    def __init__(self, backend: object, choices: tuple[str, ...]) -> None:
        self.backend, self.choices = backend, choices
        self.suggestions = difflib.get_close_matches(str(backend), choices, n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(s) for s in self.suggestions)}?" if self.suggestions else ""
        super().__init__(
            f"unknown sandbox backend {backend!r}: backend must be one of {', '.join(choices)}.{hint} "
            "A new backend registers itself with rockroll.sandbox.backends.register_backend."
        )


@dataclasses.dataclass(frozen=True)
class BackendConfig(abc.ABC):
    """A backend's options; subclasses are frozen dataclasses with a ``type`` and a :meth:`build`."""

    #: the name the backend is chosen by (``ManagerConfig(backend=...)``, ``--backend``)
    type: ClassVar[str] = ""

    @classmethod
    def from_settings(cls, **settings: Any) -> BackendConfig:
        """This config from the shared settings it declares as fields (the others are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in settings.items() if k in names})

    @abc.abstractmethod
    def build(self) -> SandboxBackend:
        """A ready backend; raise :class:`~rockroll.sandbox.errors.BackendUnavailable` when it cannot run here."""


#: backend type -> its config class, or ``"module:Class"`` imported on first use
_BACKENDS: dict[str, type[BackendConfig] | str] = {
    "auto": "rockroll.sandbox.docker_backend:AutoConfig",
    "docker": "rockroll.sandbox.docker_backend:DockerConfig",
    "process": "rockroll.sandbox.process:ProcessConfig",
}


def register_backend(config_cls: C, *, override: bool = False) -> C:
    """Register a :class:`BackendConfig` subclass under its ``type`` (usable as a class decorator).

    A taken type raises ``ValueError`` unless ``override=True``.
    """
    if not (isinstance(config_cls, type) and issubclass(config_cls, BackendConfig)):
        raise TypeError(f"register_backend takes a BackendConfig subclass, got {config_cls!r}")
    kind = config_cls.type
    if not isinstance(kind, str) or not kind.strip():
        raise ValueError(f"{config_cls.__name__} must declare its backend type: type: ClassVar[str] = 'name'")
    if not dataclasses.is_dataclass(config_cls):
        raise TypeError(f"{config_cls.__name__} must be a dataclass (@dataclass(frozen=True))")
    if kind in _BACKENDS and not override and _BACKENDS[kind] is not config_cls:
        raise ValueError(f"sandbox backend {kind!r} is already registered (pass override=True to replace it)")
    _BACKENDS[kind] = config_cls
    return config_cls


def unregister_backend(kind: str) -> None:
    """Remove a registered type (tests use it to clean up)."""
    validate_backend_name(kind)
    del _BACKENDS[kind]


def backend_names() -> tuple[str, ...]:
    """Every registered backend type, in registration order (``auto``, ``docker``, ``process`` first)."""
    return tuple(_BACKENDS)


def validate_backend_name(kind: str) -> str:
    """``kind`` when it is registered; else :class:`UnknownBackendError` (a ``ValueError``). Imports nothing."""
    if not isinstance(kind, str) or kind not in _BACKENDS:
        raise UnknownBackendError(kind, backend_names())
    return kind


def backend_config_class(kind: str) -> type[BackendConfig]:
    """The config class registered as ``kind`` (imported now when it was registered lazily)."""
    target = _BACKENDS[validate_backend_name(kind)]
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        loaded = getattr(importlib.import_module(module), attr)
        if not (isinstance(loaded, type) and issubclass(loaded, BackendConfig)) or loaded.type != kind:
            raise TypeError(f"{target} is not a BackendConfig with type {kind!r}")
        _BACKENDS[kind] = target = loaded
    return target


def backend_config(kind: str, **settings: Any) -> BackendConfig:
    """The config of backend ``kind`` with the settings it declares (see :meth:`BackendConfig.from_settings`)."""
    return backend_config_class(kind).from_settings(**settings)


def make_backend(backend: str | BackendConfig, **settings: Any) -> SandboxBackend:
    """Build a backend from its type (plus shared settings) or from a config.

    ``make_backend("process", state_dir="/tmp/sb")``, ``make_backend("docker", docker_hosts=(...))``,
    ``make_backend("auto", image="rockroll-sandbox:latest")``; with a config the settings are ignored.
    """
    config = backend if isinstance(backend, BackendConfig) else backend_config(backend, **settings)
    return config.build()
