"""Typed errors of the reward stage of single-turn RLVR (:mod:`rockroll.agentrl.rewards`).

Each derives from :class:`RewardError` (a :class:`~rockroll.envs.errors.RockrollError`) and from
the built-in a caller expects: a bad name or tag is a ``ValueError``/``LookupError`` (through
:class:`~rockroll.envs.registries.UnknownNameError`), a bad dataset row a ``ValueError``, an
unanswering judge endpoint a ``ConnectionError``. A reward that raises is an infra failure of the
sample (:mod:`rockroll.agentrl.rewards.router` records it, never a zero score).
"""

from __future__ import annotations

from collections.abc import Iterable

from rockroll.envs.errors import RockrollError
from rockroll.envs.registries import UnknownNameError

__all__ = [
    "RewardError",
    "UnknownRewardError",
    "UnknownTagError",
    "DatasetRowError",
    "JudgeParseError",
    "JudgeEndpointError",
]


class RewardError(RockrollError):
    """Base of every error of :mod:`rockroll.agentrl.rewards`."""


class UnknownRewardError(UnknownNameError, RewardError):
    """No reward is registered under this name (lists the registered ones)."""

    def __init__(self, name: object, choices: Iterable[str]) -> None:
        super().__init__("reward", name, choices, "reward")


class UnknownTagError(UnknownNameError, RewardError):
    """A sample's tag has no route in the reward router's config (lists the configured tags)."""

    def __init__(self, name: object, choices: Iterable[str]) -> None:
        super().__init__("reward tag", name, choices, "routes", hint="Add a route for it to the reward config.")


class DatasetRowError(RewardError, ValueError):
    """A dataset row that cannot become a sample: names the source and the row.

    Attributes:
        source: the file or folder read (or the generator's name).
        row: the row's index (0-based; for JSONL the line is ``row + 1``).
        missing: the fields the row lacks (empty when the problem is another one).
    """

    def __init__(self, source: str, row: int, message: str, missing: tuple[str, ...] = ()) -> None:
        super().__init__(f"{source}: row {row}: {message}")
        self.source, self.row, self.missing = source, row, missing


class JudgeParseError(RewardError, ValueError):
    """The judge answered, but no score could be read from its text (an infra failure, not a zero)."""

    def __init__(self, text: str, pattern: str) -> None:
        super().__init__(f"no score matching {pattern!r} in the judge's answer {text[:200]!r}")
        self.text, self.pattern = text, pattern


class JudgeEndpointError(RewardError, ConnectionError):
    """The judge endpoint failed (refused, timed out, non-2xx, malformed JSON)."""

    def __init__(self, url: str, message: str, status: int | None = None) -> None:
        super().__init__(f"judge endpoint {url}: {message}")
        self.url, self.status = url, status
