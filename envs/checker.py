"""``check_env(env)``: the text-env contract checked on a user's env, one small named check at a time.

Each check raises :class:`EnvCheckError` naming the check and what went wrong. The checks:

* ``instructions``: ``system_prompt()`` is non-empty text;
* ``reset``: ``reset(seed=...)`` returns a string observation in the observation space and an
  ``info`` with ``action_is_valid``, ``action_is_effective`` and ``success``, all JSON-serialisable;
* ``tools`` (tool envs only, those declaring ``tools``): the schemas are valid function schemas; every tool
  has a call in ``tool_examples()`` that runs, in a fresh episode, to a result that is not an error, reported
  in ``info["tool_results"]``; a turn calling an unknown tool, and one with arguments failing a schema,
  answer with error results (not exceptions), cost ``format_penalty`` and leave the episode going; a fork
  made after tool turns plays the same continuation as its original;
* ``step``: ``step`` returns ``(str, float, bool, bool, info)`` with those keys, for legal answers
  and junk alike;
* ``typed_errors``: ``step`` before ``reset`` raises ``ResetNeeded``; a non-string action raises
  ``ActionTypeError``;
* ``unparsable_answer``: an answer without tags is a no-op that costs ``format_penalty`` (not for tool envs:
  what a turn without a call means is a tool env's choice);
* ``determinism``: the same seed and the same actions give the same episode (for a tool env the actions are
  its example calls, unknown tools and text turns);
* ``state_round_trip``: ``get_state()`` survives JSON, and a fork made with ``set_state`` plays the
  same continuation as the original while the original stays where it was (an env that cannot be
  forked says so by raising ``EnvError`` from ``get_state``; anything else fails the check).

A second, fresh copy of the env is needed for ``tools`` and the last three: pass ``make`` (a zero-argument
factory for an env with the same settings), or ``check_env`` deep-copies ``env`` before touching it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any, Protocol, cast

import numpy as np

from rockroll.envs.action_wire import tools_of
from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.errors import ActionTypeError, EnvConfigError, EnvError, ResetNeeded, RockrollError
from rockroll.envs.tools import Action, Tool, ToolAction, ToolCall, check_call, check_tools

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


def _action(env: CheckedEnv, rng: np.random.Generator, i: int) -> Action:
    """Step ``i`` of a seeded mix of legal answers (from ``action_candidates``) and junk; for a tool env,
    of its example calls, calls of an unknown tool and turns of text."""
    if tools_of(env):
        return _tool_action(env, rng, i)
    candidates = env.action_candidates()
    if i % 5 == 4 or not candidates:
        return "no answer tags here"
    return f"thinking... <answer>{candidates[int(rng.integers(len(candidates)))]}</answer>"


def _examples(env: CheckedEnv) -> list[ToolCall]:
    """The env's example calls (``tool_examples()``; none when the handle has no such method)."""
    found = getattr(env, "tool_examples", None)
    return list(found()) if callable(found) else []


def _tool_action(env: CheckedEnv, rng: np.random.Generator, i: int) -> Action:
    examples = _examples(env)
    if i % 5 == 4 or not examples:
        return "no answer tags here"
    if i % 5 == 3:
        return ToolAction("", (ToolCall(f"check{i}", "no_such_tool", {}),))
    call = examples[int(rng.integers(len(examples)))]
    return ToolAction("thinking...", (ToolCall(f"check{i}", call.name, dict(call.arguments)),))


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
    if tools_of(env):  # a turn without a call means what the tool env says (a final answer, a nudge)
        return
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
    if _forkable(original):
        _check_fork(original, make, "state_round_trip")


def _check_fork(original: CheckedEnv, make: Callable[[], CheckedEnv], check: str) -> None:
    """A fork of ``original`` (a snapshot through JSON) renders and plays like it, and leaves it where it was."""
    snapshot = json.loads(json.dumps(original.get_state()))
    fork = make()
    fork.set_state(snapshot)
    _require(fork.render() == original.render(), check, "the fork renders differently from its original")
    forked = _play(fork, np.random.default_rng(9), 8, start=1)
    _require(json.loads(json.dumps(original.get_state())) == snapshot, check, "playing the fork moved the original")
    _require(
        forked == _play(original, np.random.default_rng(9), 8, start=1),
        check,
        "the fork and the original played differently",
    )


def _one_call(env: CheckedEnv, call: ToolCall, what: str) -> tuple[float, bool, bool, dict[str, Any]]:
    """Step a turn of ``call`` alone; its reward, terminated, truncated and info (one result for the call)."""
    try:
        _obs, reward, terminated, truncated, info = env.step(ToolAction("", (call,)))
    except Exception as e:  # noqa: BLE001 - the check: a tool turn answers with results, it never raises
        raise EnvCheckError("tools", f"{what} raised {type(e).__name__}: {e} (it must answer with a result)") from e
    _info_ok(info, "tools")
    results = info.get("tool_results")
    _require(
        isinstance(results, list) and len(results) == 1 and isinstance(results[0], dict),
        "tools",
        f"{what}: info['tool_results'] must hold one result for the one call, got {results!r:.200}",
    )
    result: dict[str, Any] = cast(list[dict[str, Any]], results)[0]
    _require(
        result.get("tool_call_id") == call.id and result.get("name") == call.name,
        "tools",
        f"{what}: the result must carry the call's id {call.id!r} and name {call.name!r}, got {result!r:.200}",
    )
    _require(isinstance(result.get("content"), str), "tools", f"{what}: the result's content must be text")
    return reward, terminated, truncated, info


def _bad_arguments(tools: tuple[Tool, ...]) -> ToolCall | None:
    """A call of a declared tool whose arguments its schema refuses (None: every schema takes anything)."""
    for tool in tools:
        props = dict(tool.parameters).get("properties") or {}
        candidates: list[dict[str, Any]] = [{}, *({p: {"not": ["valid"]}} for p in props), {"__not_a_parameter__": 1}]
        for args in candidates:
            call = ToolCall("check-bad-arguments", tool.name, args)
            if check_call(call, tools):
                return call
    return None


def _check_examples(tools: tuple[Tool, ...], env: CheckedEnv) -> list[ToolCall]:
    """Every tool has an example call that runs to a result that is not an error; those that leave the episode going."""
    _require(
        callable(getattr(env, "tool_examples", None)),
        "tools",
        "a tool env gives example calls, tool_examples() -> list[ToolCall] (one valid call of each tool)",
    )
    env.reset(seed=0)
    examples = _examples(env)
    missing = sorted({t.name for t in tools} - {c.name for c in examples})
    _require(not missing, "tools", f"tool_examples() gives no call of {missing}: give one valid call of each tool")
    going = []
    for call in examples:
        problem = check_call(call, tools)
        _require(not problem, "tools", f"tool_examples() gives a call its tools refuse: {problem}")
        env.reset(seed=0)
        what = f"the example call {call.name}({json.dumps(dict(call.arguments))[:120]})"
        _reward, terminated, truncated, info = _one_call(env, call, what)
        result = info["tool_results"][0]
        _require(result.get("error") is False, "tools", f"{what} gave an error result: {result.get('content')!r:.200}")
        _require(info.get("action_is_valid") is True, "tools", f"{what}: action_is_valid must be True")
        if not (terminated or truncated):
            going.append(call)
    return going


def _check_bad_calls(tools: tuple[Tool, ...], env: CheckedEnv) -> None:
    """An unknown tool and bad arguments are the agent's mistakes: error results, the penalty, the episode goes on."""
    env.reset(seed=0)
    penalty = getattr(env, "format_penalty", None)
    turns = [("unknown_tools", "a call of an unknown tool", ToolCall("check-unknown", "no_such_tool", {}))]
    bad = _bad_arguments(tools)
    if bad is not None:
        turns.append(("bad_arguments", f"a call of {bad.name} with arguments its schema refuses", bad))
    for count, what, call in turns:
        reward, terminated, truncated, info = _one_call(env, call, what)
        _require(info["tool_results"][0].get("error") is True, "tools", f"{what} must give an error result")
        _require(info.get("action_is_valid") is False, "tools", f"{what}: action_is_valid must be False")
        _require(info.get(count) == 1, "tools", f"{what}: info[{count!r}] must be 1, got {info.get(count)!r}")
        _require(not terminated, "tools", f"{what} must not end the episode")
        if penalty is not None:
            _require(reward == penalty, "tools", f"{what} must cost format_penalty ({penalty}), got {reward}")
        if truncated:
            env.reset(seed=0)


def check_tool_calls(env: CheckedEnv, make: Callable[[], CheckedEnv]) -> None:
    tools = tools_of(env)
    if not tools:
        return
    try:
        check_tools(tools)
    except EnvConfigError as e:
        raise EnvCheckError("tools", str(e)) from e
    probe = make()
    going = _check_examples(tools, probe)
    _check_bad_calls(tools, probe)
    if not _forkable(probe):
        return
    probe.reset(seed=0)  # a fork after tool turns: the example calls that leave the episode going, then a bad one
    for call in [*going, ToolCall("check-unknown", "no_such_tool", {})]:
        _reward, terminated, truncated, _info = _one_call(probe, call, f"the call {call.name}")
        if terminated or truncated:  # together they end it: fork after the bad call alone
            probe.reset(seed=0)
            _one_call(probe, ToolCall("check-unknown", "no_such_tool", {}), "a call of an unknown tool")
            break
    _check_fork(probe, make, "tools")


#: name -> check, in the order ``check_env`` runs them
CHECKS: dict[str, Callable[[CheckedEnv, Callable[[], CheckedEnv]], None]] = {
    "instructions": check_instructions,
    "reset": check_reset,
    "tools": check_tool_calls,
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
