"""Serve a trained policy as it was trained: the episode settings of its export, applied by default.

A run's export holds ``rockroll_episode.json`` (:data:`~rockroll.agentrl.eval.config.EPISODE_FILE`,
written by the training pipeline): how each turn of its episodes was played. The trainer's turn is
the tokenizer's chat template over ``[system?, user: observation]`` (+ the generation prompt),
decoded for at most ``max_tokens_per_turn`` tokens until an EOS token, at the run's ``temperature``
and ``top_p``. :class:`EpisodeDefaults` makes a chat request the same turn by default:

* ``system_prompt: none``: the policy never saw a system message, so a request's system (and
  developer) messages are dropped. ``env`` (one env in the run): the env's instructions (recorded in the
  export as ``system_text``) are the system message when the request brings none (a request's own system
  message is kept).
* ``observation_format: cells``: user messages are spaced out cell by cell as the policy saw them
  (send the observation as the env renders it).
* ``history: last_k``: only the last ``history_k`` exchanges before the newest user message are kept.
* ``max_tokens`` defaults to ``max_tokens_per_turn``, ``temperature``/``top_p`` to the run's; a
  request's own values win (``max_tokens`` up to the model's context).

``/v1/completions`` takes its prompt as given; only its ``max_tokens`` default is the turn's.
``rockroll serve-model --no-episode`` turns all of this off (OpenAI's defaults, messages as sent).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rockroll.envhub as envhub
from rockroll.agentrl.eval.config import EPISODE_FILE
from rockroll.agentrl.models.chat import format_observation

__all__ = ["EpisodeDefaults", "load_episode"]

_SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True)
class EpisodeDefaults:
    """How a chat request is made into the trainer's turn (see the module docstring)."""

    source: Path
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    drop_system: bool = False
    system_text: str | None = None  # the env's instructions to add when a request has no system message
    observation_format: str = "raw"
    last_k: int | None = None  # history last_k: exchanges kept; None: all

    def messages(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        """``messages`` as the trained policy saw such a turn."""
        system = [m for m in messages if m["role"] in _SYSTEM_ROLES]
        rest = [m for m in messages if m["role"] not in _SYSTEM_ROLES]
        if self.drop_system:
            system = []
        elif not system and self.system_text:
            system = [{"role": "system", "content": self.system_text}]
        if self.observation_format != "raw":
            rest = [
                {**m, "content": format_observation(m["content"], self.observation_format)}  # type: ignore[arg-type]
                if m["role"] == "user"
                else m
                for m in rest
            ]
        if self.last_k is not None and rest:
            last_user = max((i for i, m in enumerate(rest) if m["role"] == "user"), default=len(rest) - 1)
            rest = rest[max(0, last_user - 2 * self.last_k) :]
        return system + rest

    def describe(self) -> str:
        """One line for the server's start: what a chat request gets by default."""
        if self.drop_system:
            system = "no system message (as trained: request system messages are dropped)"
        elif self.system_text:
            system = "the env's instructions as the system message when a request has none"
        else:
            system = "system messages as sent"
        parts = [system, f"max_tokens {self.max_tokens}", f"temperature {self.temperature}"]
        if self.observation_format != "raw":
            parts.append(f"user messages in observation format {self.observation_format}")
        if self.last_k is not None:
            parts.append(f"the last {self.last_k} exchanges kept")
        return "; ".join(parts)


def load_episode(model_dir: str | Path) -> EpisodeDefaults | None:
    """The defaults of the export at ``model_dir`` (None: no episode file, or a run without turns).

    Raises ValueError when the file is not readable JSON.
    """
    path = Path(model_dir) / EPISODE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not readable JSON ({e}); fix or remove it, or pass --no-episode") from e
    if not isinstance(data, dict) or "max_tokens_per_turn" not in data:
        return None  # not a multi-turn run: no turn settings were recorded
    envs = data.get("envs") or []
    system_text = data.get("system_text") if isinstance(data.get("system_text"), str) else None
    if system_text is None and data.get("system_prompt", "env") == "env" and len(envs) == 1:
        system_text = _env_instructions(envs[0])  # an export written before the text was recorded
    return EpisodeDefaults(
        source=path,
        max_tokens=_int(data.get("max_tokens_per_turn")),
        temperature=_float(data.get("temperature")),
        top_p=_float(data.get("top_p")),
        drop_system=data.get("system_prompt") == "none",
        system_text=system_text,
        observation_format=str(data.get("observation_format") or "raw"),
        last_k=_int(data.get("history_k")) if data.get("history") == "last_k" else None,
    )


def _env_instructions(entry: dict[str, Any]) -> str | None:
    """The system prompt of the run's env (None when the env cannot be made here)."""
    try:
        env = envhub.make(str(entry["env_id"]), **dict(entry.get("env_kwargs") or {}))
        try:
            env.reset(seed=0)
            return str(env.system_prompt()) or None
        finally:
            env.close()
    except Exception:  # noqa: BLE001 - an env not installed here: requests bring their own system message
        return None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
