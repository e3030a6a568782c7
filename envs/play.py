"""Play whole episodes with a simple policy (random or expert): the scripted demo and smoke runs.

Text envs and tool envs (:class:`~rockroll.envs.tool_env.ToolEnv`, which declare ``tools``) alike. On a text
env a move is answer text, sent as ``<answer>MOVE</answer>``. On a tool env the expert's
:class:`~rockroll.envs.tools.ToolAction` goes to ``env.step`` as it is, and the random policy picks one of
the env's ``tool_examples()`` (a turn with that one call) or a turn of text (:data:`RANDOM_TEXT_TURN`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.experts import expert_for
from rockroll.envs.tools import Action, ToolAction, ToolCall

__all__ = [
    "EpisodeResult",
    "play_episode",
    "POLICIES",
    "RANDOM_TEXT_TURN",
    "call_text",
    "describe_action",
    "is_tool_env",
    "random_tool_turn",
]

POLICIES = ("random", "expert")
#: the text turn among the random policy's choices on a tool env (a turn without a call)
RANDOM_TEXT_TURN = "I am done."


@dataclass
class EpisodeResult:
    """Outcome of one episode (the tool counts stay 0 on a text env)."""

    seed: int
    steps: int = 0
    total_reward: float = 0.0
    success: bool = False
    terminated: bool = False
    truncated: bool = False
    invalid_actions: int = 0
    frames: list[str] = field(default_factory=list)
    tool_calls: int = 0  #: calls made (every call of every turn, good or bad)
    unknown_tools: int = 0  #: calls naming no declared tool
    bad_arguments: int = 0  #: calls whose arguments failed the tool's schema


def is_tool_env(env: object) -> bool:
    """Whether ``env`` (through its wrappers) declares tools and so takes tool-calling turns."""
    return bool(getattr(getattr(env, "unwrapped", env), "tools", ()))


def random_tool_turn(env: object, rng: np.random.Generator) -> ToolAction:
    """A uniform pick among the env's ``tool_examples()`` (each a turn with that one call) and a text turn."""
    examples = getattr(getattr(env, "unwrapped", env), "tool_examples", None)
    calls: list[ToolCall] = list(examples()) if callable(examples) else []
    turns = [ToolAction("", (c,)) for c in calls] + [ToolAction(RANDOM_TEXT_TURN)]
    return turns[int(rng.integers(len(turns)))]


def call_text(call: ToolCall) -> str:
    """A call as ``name({"arg": ...})``: its arguments as JSON."""
    return f"{call.name}({json.dumps(dict(call.arguments), ensure_ascii=False)})"


def describe_action(action: Action) -> str:
    """An action as one readable text: text as is; a tool turn's text, then each call on a line of its own."""
    if isinstance(action, str):
        return action
    return "\n".join(([action.text] if action.text else []) + [call_text(c) for c in action.calls])


def _move(env: TextEnvProtocol, expert: Callable[[], Any] | None, rng: np.random.Generator) -> Action:
    """The policy's next action: a tool turn as it is, text wrapped in ``<answer>`` tags."""
    if expert is not None:
        move = expert()
    elif is_tool_env(env):
        move = random_tool_turn(env, rng)
    else:
        candidates = env.action_candidates()
        move = str(rng.choice(candidates)) if candidates else None
    if isinstance(move, ToolAction):
        return move
    return f"<answer>{move}</answer>" if move is not None else "<answer></answer>"


def _count(result: EpisodeResult, reward: float, info: dict[str, Any]) -> None:
    result.steps += 1
    result.total_reward += reward
    result.invalid_actions += 0 if info["action_is_valid"] else 1
    result.success = bool(info["success"])
    result.tool_calls += int(info.get("tool_calls", 0))
    result.unknown_tools += int(info.get("unknown_tools", 0))
    result.bad_arguments += int(info.get("bad_arguments", 0))


def play_episode(
    env: TextEnvProtocol,
    policy: str,
    seed: int,
    *,
    record: bool = False,
    on_step: Callable[[str, str, float], None] | None = None,
) -> EpisodeResult:
    """Reset ``env`` with ``seed`` and play until it terminates or truncates.

    ``policy`` is ``"random"`` (seeded by ``seed``: uniform over ``action_candidates()``, or on a tool env
    over :func:`random_tool_turn`'s turns) or ``"expert"`` (the env's privileged solver, see
    :mod:`rockroll.envs.experts`; a tool env's expert gives tool turns). ``on_step`` gets each action as
    :func:`describe_action` writes it, the observation and the reward.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    result = EpisodeResult(seed=seed)
    if record:
        result.frames.append(obs)
    expert = expert_for(env) if policy == "expert" else None
    while True:
        action = _move(env, expert, rng)
        obs, reward, terminated, truncated, info = env.step(action)
        _count(result, float(reward), info)
        if record:
            result.frames.append(obs)
        if on_step is not None:
            on_step(describe_action(action), obs, float(reward))
        if terminated or truncated:
            result.terminated, result.truncated = bool(terminated), bool(truncated)
            return result
