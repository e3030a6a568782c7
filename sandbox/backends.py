"""Sandbox backends by type: one registry, ``make_backend("process")``.

Every backend has a config (a frozen :class:`~rockroll.envs.config.ConfigModel`, beside the
backend) that declares its ``type`` and builds the backend. Its fields are the backend's options; :func:`make_backend` fills the fields it
declares among the manager's shared settings (``state_dir``, ``docker_hosts``, ``image``), so the
manager, ``rockroll serve --backend``, the trainer's ``rollout.sandbox`` and the API settings all
accept every registered type. Adding a backend is one file plus one registration::

    @register_backend
    class FirecrackerConfig(BackendConfig):
        type: ClassVar[str] = "firecracker"
        state_dir: str = Field("/tmp/rockroll-fc", description="host directory of sockets and VM files")
        kernel: str = Field("/var/lib/firecracker/vmlinux", description="the guest kernel image")

        def build(self) -> SandboxBackend:
            return FirecrackerBackend(state_dir=self.state_dir, kernel=self.kernel)

then ``SandboxManager(backend="firecracker")`` or ``SandboxManager(backend=FirecrackerConfig(kernel=...))``.
The types are one :class:`~rockroll.envs.registries.Registry`; the built-in ones are registered as
lazy ``"module:Class"`` strings, so listing them imports no backend. This module imports nothing
beyond the standard library, pydantic, the config dialect, the registry and the sandbox errors.

Threat model: none of its own; each backend's module states how strongly it isolates.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import ConfigDict

from rockroll.envs.config import ConfigModel
from rockroll.envs.registries import Registry, UnknownNameError
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


class UnknownBackendError(UnknownNameError, SandboxError):
    """No backend is registered under this type (a ``ValueError`` and a ``SandboxError``).

    Attributes:
        backend: the type asked for (also ``name``).
        choices: the registered types.
        suggestions: registered types close to ``backend``.
    """

    def __init__(self, backend: object, choices: tuple[str, ...]) -> None:
        super().__init__(
            "sandbox backend", backend, choices, "backend",
            hint="A new backend registers itself with rockroll.sandbox.backends.register_backend.",
        )  # fmt: skip
        self.backend = backend


class BackendConfig(ConfigModel, abc.ABC):
    """A backend's options; subclasses declare a ``type``, their options as described fields, and a :meth:`build`.

    Frozen and hashable, like every sandbox config (a manager's config holds one).
    """

    model_config = ConfigDict(frozen=True)

    #: the name the backend is chosen by (``ManagerConfig(backend=...)``, ``--backend``)
    type: ClassVar[str] = ""

    @classmethod
    def from_settings(cls, **settings: Any) -> BackendConfig:
        """This config from the shared settings it declares as fields (the others are ignored)."""
        return cls(**{k: v for k, v in settings.items() if k in cls.model_fields})

    @abc.abstractmethod
    def build(self) -> SandboxBackend:
        """A ready backend; raise :class:`~rockroll.sandbox.errors.BackendUnavailable` when it cannot run here."""


#: backend type -> its config class, or ``"module:Class"`` imported on first use
_BACKENDS: Registry[type[BackendConfig]] = Registry(
    "sandbox backend",
    "backend",
    entries={
        "auto": "rockroll.sandbox.docker_backend:AutoConfig",
        "docker": "rockroll.sandbox.docker_backend:DockerConfig",
        "process": "rockroll.sandbox.process:ProcessConfig",
    },
    error=UnknownBackendError,
)


def register_backend(config_cls: C, *, override: bool = False) -> C:
    """Register a :class:`BackendConfig` subclass under its ``type`` (usable as a class decorator).

    A taken type raises ``ValueError`` unless ``override=True``.
    """
    if not (isinstance(config_cls, type) and issubclass(config_cls, BackendConfig)):
        raise TypeError(f"register_backend takes a BackendConfig subclass, got {config_cls!r}")
    kind = config_cls.type
    if not isinstance(kind, str) or not kind.strip():
        raise ValueError(f"{config_cls.__name__} must declare its backend type: type: ClassVar[str] = 'name'")
    again = kind in _BACKENDS and _BACKENDS.entry(kind) is config_cls  # registering the same class twice is fine
    _BACKENDS.add(kind, config_cls, override=override or again)
    return config_cls


def unregister_backend(kind: str) -> None:
    """Remove a registered type (tests use it to clean up)."""
    _BACKENDS.remove(kind)


def backend_names() -> tuple[str, ...]:
    """Every registered backend type, in registration order (``auto``, ``docker``, ``process`` first)."""
    return _BACKENDS.names()


def validate_backend_name(kind: str) -> str:
    """``kind`` when it is registered; else :class:`UnknownBackendError` (a ``ValueError``). Imports nothing."""
    return _BACKENDS.check(kind)


def backend_config_class(kind: str) -> type[BackendConfig]:
    """The config class registered as ``kind`` (imported now when it was registered lazily)."""
    target = _BACKENDS.entry(kind)
    loaded = _BACKENDS.get(kind)
    if not (isinstance(loaded, type) and issubclass(loaded, BackendConfig)) or loaded.type != kind:
        raise TypeError(f"{target} is not a BackendConfig with type {kind!r}")
    return loaded


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
