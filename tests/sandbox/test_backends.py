"""Sandbox backends are one registry: a registered type is usable by name everywhere that picks one."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import Field

from rockroll.envs.config import ConfigError
from rockroll.sandbox.backends import (
    BackendConfig,
    UnknownBackendError,
    backend_config,
    backend_names,
    make_backend,
    register_backend,
    unregister_backend,
    validate_backend_name,
)
from rockroll.sandbox.errors import SandboxError
from rockroll.sandbox.manager import ManagerConfig, SandboxManager
from rockroll.sandbox.manager import make_backend as manager_backend
from rockroll.sandbox.process import ProcessBackend, ProcessConfig


class FakeBackend:
    """Stands in for a SandboxBackend: remembers the options it was built with."""

    name = "fake"

    def __init__(self, **options: Any) -> None:
        self.options = options

    def list_managed(self, manager: str) -> list[Any]:
        return []


@pytest.fixture
def fake_type():
    @register_backend
    class FakeConfig(BackendConfig):
        type: ClassVar[str] = "fake"
        state_dir: str = Field("/nowhere", description="where the fake keeps nothing")
        flavour: str = Field("vanilla", description="an option of the fake backend")

        def build(self) -> Any:
            return FakeBackend(state_dir=self.state_dir, flavour=self.flavour)

    yield FakeConfig
    unregister_backend("fake")


def test_builtin_types_are_listed_without_importing_them() -> None:
    assert backend_names()[:3] == ("auto", "docker", "process")


def test_registered_backend_is_usable_by_name(fake_type: type[BackendConfig], tmp_path) -> None:
    assert "fake" in backend_names()
    built = make_backend("fake", state_dir=str(tmp_path), docker_hosts=("ignored",), image="ignored")
    assert isinstance(built, FakeBackend) and built.options == {"state_dir": str(tmp_path), "flavour": "vanilla"}
    # the manager passes its shared settings; a config instance carries its own options
    assert manager_backend(ManagerConfig(backend="fake", state_dir=str(tmp_path))).options["state_dir"] == str(tmp_path)
    cfg = ManagerConfig(backend=fake_type(flavour="mint"))
    assert manager_backend(cfg).options == {"state_dir": "/nowhere", "flavour": "mint"}
    for backend in ("fake", fake_type(flavour="mint")):
        m = SandboxManager(backend=backend, db_url=f"sqlite:///{tmp_path}/sb.db", monitor_interval_s=None)
        try:
            assert isinstance(m.backend, FakeBackend)
        finally:
            m.close()


def test_every_backend_choice_reads_the_registry(fake_type: type[BackendConfig]) -> None:
    from rockroll.api.server.settings import Settings
    from rockroll.trainer.config import RolloutConfig

    assert Settings(backend="fake").backend == "fake"
    assert RolloutConfig(sandbox="fake").sandbox == "fake"
    with pytest.raises(ValueError, match="docker"):
        Settings(backend="dockr")
    with pytest.raises(ValueError, match="must be one of"):
        RolloutConfig(sandbox="dockr")


def test_unknown_type_names_close_ones() -> None:
    with pytest.raises(UnknownBackendError, match=r"must be one of auto, docker, process.*Did you mean 'process'") as e:
        validate_backend_name("proces")
    assert isinstance(e.value, ValueError) and isinstance(e.value, SandboxError)
    assert e.value.suggestions[0] == "process"
    with pytest.raises(ConfigError, match=r"must be one of auto, docker, process.*Did you mean 'process'") as c:
        ManagerConfig(backend="proces")  # the config dialect's error, naming the key
    assert c.value.key == "backend"


def test_builtin_configs_build_their_backend(tmp_path) -> None:
    cfg = backend_config("process", state_dir=str(tmp_path), docker_hosts=("x",), image="y")
    assert cfg == ProcessConfig(state_dir=str(tmp_path))
    backend = make_backend(ProcessConfig(state_dir=str(tmp_path), isolation="none"))
    assert isinstance(backend, ProcessBackend) and backend.isolation == "none"


def test_registration_is_checked(fake_type: type[BackendConfig]) -> None:
    class Nameless(BackendConfig):
        def build(self) -> Any:
            return None

    with pytest.raises(ValueError, match="must declare its backend type"):
        register_backend(Nameless)

    class Again(BackendConfig):
        type: ClassVar[str] = "fake"

        def build(self) -> Any:
            return None

    with pytest.raises(ValueError, match="already registered"):
        register_backend(Again)
    with pytest.raises(TypeError, match="BackendConfig subclass"):
        register_backend(FakeBackend)  # type: ignore[arg-type]
