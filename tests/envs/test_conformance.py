"""Every registered env honours the text-env contract, checked by the shipped ``rockroll.envs.check_env``."""

from __future__ import annotations

import pytest

import rockroll.envhub as envhub
from rockroll.envs import EnvCheckError, check_env
from rockroll.envs.checker import CHECKS
from rockroll.envs.frozenlake import FrozenLakeEnv

ENV_IDS = [s.id for s in envhub.list_envs() if "slow" not in s.tags]


@pytest.fixture(params=ENV_IDS)
def env_id(request) -> str:
    return request.param


def test_every_registered_env_passes_check_env(env_id: str) -> None:
    check_env(envhub.make(env_id), make=lambda: envhub.make(env_id))


def test_check_env_reads_the_envs_own_format_penalty(env_id: str) -> None:
    check_env(
        envhub.make(env_id, format_penalty=-0.25),
        make=lambda: envhub.make(env_id, format_penalty=-0.25),
        skip=("determinism", "state_round_trip"),
    )


def test_check_env_without_a_factory_deep_copies_the_env() -> None:
    check_env(FrozenLakeEnv())


class _NoInstructions(FrozenLakeEnv):
    def system_prompt(self) -> str:
        return "  "


class _ForgetfulFork(FrozenLakeEnv):
    def _set_state(self, data):  # restores nothing: a fork starts from wherever it was
        return None


class _UnseededEnv(FrozenLakeEnv):
    """Draws its maps from a generator that ``reset(seed=...)`` never sets."""

    _counter = 0

    def reset(self, *, seed=None, options=None):
        type(self)._counter += 1
        return super().reset(seed=type(self)._counter, options=options)


@pytest.mark.parametrize(
    ("env_cls", "check", "skip"),
    [
        (_NoInstructions, "instructions", ()),
        (_UnseededEnv, "unparsable_answer", ()),  # its fresh copy starts another map
        (_UnseededEnv, "determinism", ("unparsable_answer",)),
        (_ForgetfulFork, "state_round_trip", ()),
    ],
)
def test_check_env_names_the_broken_check(env_cls, check: str, skip: tuple[str, ...]) -> None:
    with pytest.raises(EnvCheckError) as err:
        check_env(env_cls(), make=env_cls, skip=skip)
    assert err.value.check == check
    assert str(err.value).startswith(f"{check}: ")


def test_unknown_skip_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown checks"):
        check_env(FrozenLakeEnv(), skip=("nope",))
    assert list(CHECKS)[0] == "instructions"
