"""What the model service records for agent episodes: a key per episode, and every call made with it.

An agent program (run in a sandbox) reaches the model through an OpenAI-compatible endpoint. Each episode gets
its own key (:meth:`CallRecorder.open`); a request made with it is served as usual and recorded as the engine
saw it (:class:`CallRecord`: the prompt's token ids, the sampled token ids and their logprobs, the weight
version, timing). :meth:`CallRecorder.close` ends the episode: the key stops working at once and the calls come
back, ready for :func:`trajectory_of_calls` (training rows without re-tokenising any text).

Keys are random (``secrets``) and looked up by their SHA-256, so a lookup does not compare a secret byte by
byte. An episode's calls are capped (``max_calls``): the next one is refused, recorded nothing, and the episode
is marked as having flooded (:attr:`EpisodeCalls.refused`).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from dataclasses import dataclass, field
from typing import Literal

from rockroll.agentrl.trajectory import Trajectory, Turn

__all__ = ["CallRecord", "EpisodeCalls", "CallRecorder", "CallCapReached", "trajectory_of_calls", "KEY_PREFIX"]

KEY_PREFIX = "rr-ep-"
MAX_CALLS = 256


class CallCapReached(Exception):
    """The episode made as many model calls as it may (nothing was generated for this one)."""


@dataclass
class CallRecord:
    """One choice of one call, as the engine saw it."""

    index: int  # the call's place in its episode (0, 1, ...); a request with n > 1 records n calls
    route: Literal["chat", "completion"]
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    weight_version: int
    finish_reason: str
    started: float  # time.time() when the request arrived
    ended: float
    tokens_exact: bool = True  # False: an engine re-tokenised text (not for training)


@dataclass
class EpisodeCalls:
    """An open episode: its calls so far and its cap."""

    episode_id: str
    max_calls: int
    calls: list[CallRecord] = field(default_factory=list)
    refused: int = 0  # calls refused at the cap
    pending: int = 0  # calls reserved and not recorded yet (being generated)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class CallRecorder:
    """The open episodes' keys and calls (thread-safe: the service and the rollout share it)."""

    def __init__(self, max_calls: int = MAX_CALLS) -> None:
        if max_calls < 1:
            raise ValueError(f"max_calls must be at least 1, got {max_calls}")
        self.max_calls = max_calls
        self._by_digest: dict[str, EpisodeCalls] = {}
        self._digest_of: dict[str, str] = {}
        self._lock = threading.Lock()

    def open(self, episode_id: str, max_calls: int | None = None) -> str:
        """A new key for ``episode_id`` (an episode open already is refused: one key per episode)."""
        cap = self.max_calls if max_calls is None else min(max_calls, self.max_calls)  # the server's cap bounds it
        if cap < 1:
            raise ValueError(f"max_calls must be at least 1, got {max_calls}")
        key = KEY_PREFIX + secrets.token_urlsafe(24)
        with self._lock:
            if episode_id in self._digest_of:
                raise ValueError(f"episode {episode_id!r} has a key already")
            d = _digest(key)
            self._by_digest[d] = EpisodeCalls(episode_id, cap)
            self._digest_of[episode_id] = d
        return key

    def episode_of(self, key: str) -> str | None:
        """The open episode ``key`` belongs to, or None (unknown, or its episode closed)."""
        if not key.startswith(KEY_PREFIX):
            return None
        with self._lock:
            ep = self._by_digest.get(_digest(key))
        return None if ep is None else ep.episode_id

    def reserve(self, episode_id: str, n: int = 1) -> int:
        """Room for ``n`` more calls of ``episode_id``: the index of the first (CallCapReached past the cap,
        KeyError for an episode that is not open)."""
        with self._lock:
            ep = self._by_digest[self._digest_of[episode_id]]
            taken = len(ep.calls) + ep.pending
            if taken + n > ep.max_calls:
                ep.refused += 1
                raise CallCapReached(f"this episode has made {taken} model calls, its cap is {ep.max_calls}")
            ep.pending += n
            return taken

    def record(self, episode_id: str, records: list[CallRecord], reserved: int) -> None:
        """Store ``records`` (made under a :meth:`reserve` of ``reserved`` calls; an episode closed meanwhile
        drops them)."""
        with self._lock:
            d = self._digest_of.get(episode_id)
            if d is None:
                return
            ep = self._by_digest[d]
            ep.pending = max(0, ep.pending - reserved)
            ep.calls.extend(records)
            ep.calls.sort(key=lambda c: c.index)

    def release(self, episode_id: str, reserved: int) -> None:
        """Give back a :meth:`reserve` whose calls failed (nothing recorded)."""
        self.record(episode_id, [], reserved)

    def close(self, episode_id: str) -> EpisodeCalls:
        """End ``episode_id``: its key dies now; its calls come back (KeyError: not open)."""
        with self._lock:
            d = self._digest_of.pop(episode_id)
            return self._by_digest.pop(d)

    @property
    def open_episodes(self) -> int:
        with self._lock:
            return len(self._by_digest)


def trajectory_of_calls(
    calls: list[CallRecord], *, episode_id: str, group_id: str, env_id: str, seed: int, reward: float, success: bool
) -> Trajectory:
    """An agent episode's calls as a :class:`Trajectory`: one turn per call, the tokens as sampled, the reward
    on the last turn (``final_reward`` for every row). Its rows (``to_samples("auto")``) merge calls that extend
    each other token for token and keep the others apart."""
    turns = [
        Turn(
            prompt_ids=list(c.prompt_ids),
            response_ids=list(c.response_ids),
            logprobs=list(c.logprobs),
            weight_version=c.weight_version,
            finish_reason=c.finish_reason,
            tokens_exact=c.tokens_exact,
        )
        for c in sorted(calls, key=lambda c: c.index)
    ]
    if turns:
        turns[-1].reward = reward
    return Trajectory(
        episode_id=episode_id,
        group_id=group_id,
        env_id=env_id,
        seed=seed,
        turns=turns,
        final_reward=reward,
        success=success,
        terminated=True,
        wall_time_s=(max(c.ended for c in calls) - min(c.started for c in calls)) if calls else 0.0,
    )
