"""``check_env(env)``: the text-env contract checked on a user's env, one small named check at a time.

Each check raises :class:`EnvCheckError` naming the check and what went wrong. The checks:

* ``instructions``: ``system_prompt()`` is non-empty text;
* ``reset``: ``reset(seed=...)`` returns a string observation in the observation space and an
  ``info`` with ``action_is_valid``, ``action_is_effective`` and ``success``, all JSON-serialisable;
* ``step``: ``step`` returns ``(str, float, bool, bool, info)`` with those keys, for legal answers
  and junk alike;
* ``typed_errors``: ``step`` before ``reset`` raises ``ResetNeeded``; a non-string action raises
  ``ActionTypeError``;
* ``unparsable_answer``: an answer without tags is a no-op that costs ``format_penalty``;
* ``determinism``: the same seed and the same actions give the same episode;
* ``state_round_trip``: ``get_state()`` survives JSON, and a fork made with ``set_state`` plays the
  same continuation as the original while the original stays where it was (an env that cannot be
  forked says so by raising ``EnvError`` from ``get_state``; anything else fails the check).

A second, fresh copy of the env is needed for the last three: pass ``make`` (a zero-argument
factory for an env with the same settings), or ``check_env`` deep-copies ``env`` before touching it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any, Protocol, cast

import numpy as np

from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.errors import ActionTypeError, EnvError, ResetNeeded, RockrollError

__all__ = ["CHECKS", "CheckedEnv", "EnvCheckError", "check_env"]


class CheckedEnv(TextEnvProtocol, Protocol):
    """What the checks call: the text-env contract plus ``render`` (compared across a state round trip)."""

    def render(self) -> str: ...


REQUIRED_INFO = frozenset({"action_is_valid", "action_is_effective", "success"})
STEPS = 12


class EnvCheckError(RockrollError, AssertionError):
    """An env broke the text-env contract; ``check`` names the check that failed."""

    def __init__(self, check: str, message: str):
        super().__init__(f"{check}: {message}")
        self.check = check


def _require(ok: bool, check: str, message: str) -> None:
    if not ok:
        raise EnvCheckError(check, message)


def _action(env: CheckedEnv, rng: np.random.Generator, i: int) -> str:
    """Step ``i`` of a seeded mix of legal answers (from ``action_candidates``) and junk."""
    candidates = env.action_candidates()
    if i % 5 == 4 or not candidates:
        return "no answer tags here"
    return f"thinking... <answer>{candidates[int(rng.integers(len(candidates)))]}</answer>"


def _info_ok(info: object, check: str) -> None:
    if not isinstance(info, dict):
        raise EnvCheckError(check, f"info must be a dict, got {type(info).__name__}")
    missing = REQUIRED_INFO - set(info)
    _require(not missing, check, f"info lacks {sorted(missing)}")
    try:
        json.dumps(info)
    except (TypeError, ValueError) as e:
        raise EnvCheckError(check, f"info is not JSON-serialisable: {e}") from e


def _play(env: CheckedEnv, rng: np.random.Generator, n: int, start: int = 0) -> list[tuple[object, ...]]:
    """Play up to ``n`` steps, stopping at the episode's end; return what was seen."""
    log: list[tuple[object, ...]] = []
    for i in range(start, start + n):
        action = _action(env, rng, i)
        obs, reward, terminated, truncated, info = env.step(action)
        log.append((action, obs, reward, terminated, truncated, json.dumps(info, sort_keys=True)))
        if terminated or truncated:
            break
    return log


def _rollout(env: CheckedEnv, seed: int, n: int = STEPS) -> list[tuple[object, ...]]:
    """``n`` seeded steps, resetting at each episode's end; the actions depend only on ``seed``."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    trace: list[tuple[object, ...]] = [(obs, json.dumps(info, sort_keys=True))]
    for i in range(n):
        action = _action(env, rng, i)
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((action, obs, reward, terminated, truncated, json.dumps(info, sort_keys=True)))
        if terminated or truncated:
            obs, info = env.reset()
            trace.append((obs, json.dumps(info, sort_keys=True)))
    return trace


def _game(state: dict[str, Any]) -> object:
    """The game's own data in a snapshot, under any wrappers (``MaxSteps`` nests the env's under ``env``)."""
    while "data" not in state and isinstance(state.get("env"), dict):
        state = state["env"]
    return state.get("data", state)


def _forkable(env: CheckedEnv) -> bool:
    """Whether ``env`` snapshots: an env that cannot be forked raises ``EnvError`` from ``get_state``."""
    try:
        env.get_state()
    except EnvError:
        return False
    return True


def check_instructions(env: CheckedEnv, make: Callable[[], CheckedEnv]) -> None:
    prompt = env.system_prompt()
    _require(
        isinstance(prompt, str) and bool(prompt.strip()),
        "instructions",
        "system_prompt() must give the agent its instructions",
    )


def check_reset(env: CheckedEnv, make: Callable[[], CheckedEnv]) -> None:
    obs, info = env.reset(seed=0)
    _require(isinstance(obs, str), "reset", f"the observation must be a str, got {type(obs).__name__}")
    space = getattr(env, "observation_space", None)
    _require(space is None or space.contains(obs), "reset", "the observation is outside observation_space")
    _info_ok(info, "reset")


def check_step(env: CheckedEnv, make: Callable[[], CheckedEnv]) -> None:
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for i in range(6):
        obs, reward, terminated, truncated, info = env.step(_action(env, rng, i))
        _require(isinstance(obs, str), "step", f"the observation must be a str, got {type(obs).__name__}")
        _require(isinstance(reward, float), "step", f"the reward must be a float, got {type(reward).__name__}")
        _require(
            isinstance(terminated, bool) and isinstance(truncated, bool),
            "step",
            "terminated and truncated must be bools",
        )
        _info_ok(info, "step")
        if terminated or truncated:
            env.reset()


def check_typed_errors(env: CheckedEnv, make: Callable[[], CheckedEnv]) -> None:
    fresh = make()
    try:
        fresh.step("<answer>x</answer>")
    except ResetNeeded:
        pass
    else:
        raise EnvCheckError("typed_errors", "step() before reset() must raise ResetNeeded")
    fresh.reset(seed=0)
    for bad in (3, None, b"<answer>x</answer>", ["x"]):
        try:
            fresh.step(cast(str, bad))  # the check: a non-str action is refused (the type is wrong on purpose)
        except ActionTypeError:
            continue
        raise EnvCheckError("typed_errors", f"step({bad!r}) must raise ActionTypeError")


def check_unparsable_answer(env: CheckedEnv, make: Callable[[], CheckedEnv]) -> None:
    env.reset(seed=1)
    reference = make()
    reference.reset(seed=1)
    penalty = getattr(env, "format_penalty", None)
    _obs, reward, terminated, _truncated, info = env.step("I refuse to use the answer tags")
    if penalty is not None:
        _require(
            reward == penalty,
            "unparsable_answer",
            f"an answer without tags must cost format_penalty ({penalty}), got {reward}",
        )
    _require(info.get("action_is_valid") is False, "unparsable_answer", "action_is_valid must be False")
    _require(info.get("action_is_effective") is False, "unparsable_answer", "action_is_effective must be False")
    _require(not terminated, "unparsable_answer", "an unparsable answer must not end the episode")
    if _forkable(env):
        _require(
            _game(env.get_state()) == _game(reference.get_state()),
            "unparsable_answer",
            "an invalid action must not change the game",
        )


def check_determinism(env: CheckedEnv, make: Callable[[], CheckedEnv]) -> None:
    _require(
        _rollout(make(), seed=11) == _rollout(make(), seed=11),
        "determinism",
        "the same seed and actions gave different episodes",
    )


def check_state_round_trip(env: CheckedEnv, make: Callable[[], CheckedEnv]) -> None:
    original = make()
    original.reset(seed=5)
    if _play(original, np.random.default_rng(5), 3)[-1][3:5] != (False, False):
        original.reset(seed=6)
    if not _forkable(original):
        return
    snapshot = json.loads(json.dumps(original.get_state()))
    fork = make()
    fork.set_state(snapshot)
    _require(fork.render() == original.render(), "state_round_trip", "the fork renders differently from its original")
    forked = _play(fork, np.random.default_rng(9), 8, start=1)
    _require(
        json.loads(json.dumps(original.get_state())) == snapshot,
        "state_round_trip",
        "playing the fork moved the original",
    )
    _require(
        forked == _play(original, np.random.default_rng(9), 8, start=1),
        "state_round_trip",
        "the fork and the original played differently",
    )


#: name -> check, in the order ``check_env`` runs them
CHECKS: dict[str, Callable[[CheckedEnv, Callable[[], CheckedEnv]], None]] = {
    "instructions": check_instructions,
    "reset": check_reset,
    "step": check_step,
    "typed_errors": check_typed_errors,
    "unparsable_answer": check_unparsable_answer,
    "determinism": check_determinism,
    "state_round_trip": check_state_round_trip,
}


def check_env(env: CheckedEnv, make: Callable[[], CheckedEnv] | None = None, *, skip: tuple[str, ...] = ()) -> None:
    """Run every check of :data:`CHECKS` (less ``skip``) on ``env``; raise :class:`EnvCheckError` on the first failure.

    ``make`` builds a fresh env with the same settings; without it each fresh copy is a deep copy
    of ``env`` as it was when ``check_env`` was called.
    """
    unknown = set(skip) - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown checks {sorted(unknown)}; the checks are {list(CHECKS)}")
    if make is None:
        pristine = copy.deepcopy(env)

        def make() -> CheckedEnv:
            return copy.deepcopy(pristine)

    for name, check in CHECKS.items():
        if name not in skip:
            check(env, make)
