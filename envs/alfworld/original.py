"""The original ALFWorld (TextWorld engine, ALFRED scenes) behind rockroll's text-env contract.

Needs the ``alfworld`` package and its data (``pip install alfworld`` then ``alfworld-download``;
the games live under ``$ALFWORLD_DATA/json_2.1.1/<split>/<task>/<trial>/game.tw-pddl``). Both are
imported lazily, on construction, so importing this module is free. Not registered by default
(the conformance suite builds every registered env, and this one needs the data): call
:func:`rockroll.envhub.builtin.register_alfworld_original` to get ``ALFWorldOriginal-v0``.

The episode seed picks the game file. Snapshots hold the game file and the commands played;
``set_state`` replays them (TextWorld games are deterministic), so a fork continues identically.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rockroll.envs.alfworld.commands import normalize
from rockroll.envs.alfworld.env import ALFWorldEnv
from rockroll.envs.alfworld.tasks import resolve_task_types
from rockroll.envs.alfworld.text import NOTHING_HAPPENS
from rockroll.envs.core import DEFAULT_FORMAT_PENALTY, StepOutcome, TextEnv
from rockroll.envs.errors import EnvConfigError

__all__ = ["ALFWorldOriginalEnv", "alfworld_available", "find_game_files", "SPLITS"]

SPLITS = ("train", "valid_seen", "valid_unseen")
_ENV = "ALFWorldOriginal"


def alfworld_available() -> bool:
    """Whether the ``alfworld`` and ``textworld`` packages can be imported."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("alfworld", "textworld"))


def find_game_files(root: str | os.PathLike[str], split: str, task_types: tuple[str, ...]) -> list[str]:
    """Sorted ``game.tw-pddl`` paths of ``split`` under ``root`` whose task folder is of ``task_types``."""
    base = Path(root).expanduser()
    if (base / "json_2.1.1").is_dir():
        base = base / "json_2.1.1"
    if (base / split).is_dir():
        base = base / split
    found = []
    for path in sorted(base.rglob("game.tw-pddl")):
        if any(part.split("-", 1)[0] in task_types for part in path.parts):
            found.append(str(path))
    return found


def _load_backend() -> tuple[Any, list[Any]]:
    """(textworld module, wrappers) or ModuleNotFoundError with the install hint."""
    try:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    except ImportError as e:
        raise ModuleNotFoundError(
            "ALFWorldOriginal needs the alfworld package and its data: pip install alfworld && alfworld-download "
            "(or use ALFWorld-v0, the generated version that needs nothing)"
        ) from e
    return textworld, [AlfredDemangler(shuffle=False), AlfredInfos]


class ALFWorldOriginalEnv(TextEnv[str]):
    """ALFWorld's own TextWorld games as a rockroll text env.

    Args:
        data_path: the ALFWorld data folder (default ``$ALFWORLD_DATA``, else ``~/.cache/alfworld``).
        split: ``train``, ``valid_seen`` (in-distribution eval) or ``valid_unseen`` (out of distribution).
        task_types: task types to keep (names or short names, as for ``ALFWorld-v0``); None: all six.
        format_penalty: reward of an answer that is not an admissible command.
    """

    instructions = ALFWorldEnv.instructions
    action_format = ALFWorldEnv.action_format

    def __init__(
        self,
        *,
        data_path: str | None = None,
        split: str = "train",
        task_types: list[str] | tuple[str, ...] | None = None,
        format_penalty: float = DEFAULT_FORMAT_PENALTY,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(format_penalty=format_penalty, render_mode=render_mode)
        if split not in SPLITS:
            raise EnvConfigError(f"split must be one of {', '.join(SPLITS)}, got {split!r}", env=_ENV, param="split")
        try:
            types = resolve_task_types(task_types)
        except ValueError as e:
            raise EnvConfigError(str(e), env=_ENV, param="task_types") from e
        self._textworld, self._wrappers = _load_backend()
        root = data_path or os.environ.get("ALFWORLD_DATA") or "~/.cache/alfworld"
        self.game_files = find_game_files(root, split, types)
        if not self.game_files:
            raise EnvConfigError(
                f"no ALFWorld games of split {split!r} under {root!r}: run alfworld-download or set ALFWORLD_DATA",
                env=_ENV,
                param="data_path",
            )
        self._tw: Any = None
        self._gamefile = ""
        self._actions: list[str] = []
        self._obs = ""
        self._admissible: list[str] = []
        self._won = False

    # ----------------------------------------------------------------- engine
    def _start(self, gamefile: str) -> None:
        if self._tw is not None:
            self._tw.close()
        self._tw = self._textworld.start(
            gamefile, self._textworld.EnvInfos(won=True, admissible_commands=True), wrappers=self._wrappers
        )
        self._gamefile = gamefile
        self._actions = []
        self._read(self._tw.reset())

    def _read(self, state: Any) -> None:
        self._obs = str(state.feedback).strip()
        self._admissible = sorted(str(c) for c in (state.get("admissible_commands") or []))
        self._won = bool(state.get("won") or False)

    def _play(self, command: str) -> None:
        state, _score, _done = self._tw.step(command)
        self._actions.append(command)
        self._read(state)

    # ----------------------------------------------------------------- hooks
    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        self._start(self.game_files[int(self.np_random.integers(len(self.game_files)))])
        return {"gamefile": self._gamefile}

    def _parse_action(self, answer: str) -> str | None:
        canonical = {normalize(c): c for c in self._admissible}
        return canonical.get(normalize(answer))

    def _step(self, action: str) -> StepOutcome[str]:
        self._play(action)
        done = self._won
        return StepOutcome(self._obs, 1.0 if done else 0.0, done, effective=True, success=done)

    def _render(self) -> str:
        return self._obs

    def _invalid_observation(self, answer: str | None) -> str:
        return NOTHING_HAPPENS

    def _extra_info(self) -> dict[str, Any]:
        return {"admissible_commands": list(self._admissible)}

    def action_candidates(self) -> list[str]:
        return list(self._admissible)

    def _get_state(self) -> dict[str, Any]:
        return {"gamefile": self._gamefile, "actions": list(self._actions)}

    def _set_state(self, data: dict[str, Any]) -> None:
        gamefile, actions = str(data["gamefile"]), [str(a) for a in data["actions"]]
        if not gamefile:
            return
        self._start(gamefile)
        for command in actions:
            self._play(command)

    def close(self) -> None:
        if self._tw is not None:
            self._tw.close()
            self._tw = None
