"""The one contract between ``agentrl/`` (rollout) and ``trainer/`` (training).

A :class:`Trajectory` is one episode: every turn's prompt and response token ids, the rollout
logprob of every response token, per-turn and final rewards, env metrics, ids (group, episode,
seed), the policy weight version that produced each turn, and a failure tag when infrastructure
broke. :meth:`Trajectory.to_samples` turns it into :class:`TrainSample` rows whose
``response_mask`` is 1 exactly on model-generated tokens.

Two layouts:

* ``"concat"``: the whole conversation as one sequence (valid when each turn's prompt extends
  the previous turn's prompt + response, i.e. full history); earlier responses stay trainable,
  env and template tokens are masked out.
* ``"per_turn"``: one sample per turn (prompt, response); needed with truncated history.
* ``"auto"``: one sample per run of turns that extend each other (an agent program's calls: those that
  resend the conversation so far merge, a call that starts over begins a new row).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["Turn", "FailureTag", "Trajectory", "TrainSample", "FailureKind"]

FailureKind = Literal["infra", "agent"]


@dataclass
class Turn:
    """One model turn: what the model saw, what it said, and what the env answered."""

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    weight_version: int
    action_text: str = ""
    observation: str = ""
    reward: float = 0.0
    action_is_valid: bool = True
    action_is_effective: bool = False
    finish_reason: str = "stop"
    #: the observation the policy acted on (GiGPO-style anchor states group turns by it)
    state_key: str = ""
    #: per response token, the ids the engine chose among (restricted answers,
    #: :mod:`rockroll.agentrl.engines.choices`; an empty tuple: any); None: sampled freely
    allowed: list[tuple[int, ...]] | None = None
    #: a tool env's counts of this turn (``tool_calls``, ``malformed_calls``, ``unknown_tools``,
    #: ``bad_arguments``, ``tool_errors``); None: a text env's turn
    tools: dict[str, int] | None = None
    #: False: the ids are the reply's text re-tokenised (a chat server's turn): not for training
    tokens_exact: bool = True

    def __post_init__(self) -> None:
        if len(self.logprobs) != len(self.response_ids):
            raise ValueError(
                f"a turn needs one logprob per response token: {len(self.logprobs)} logprobs "
                f"for {len(self.response_ids)} tokens"
            )


@dataclass
class FailureTag:
    """Why an episode did not finish normally.

    ``kind="infra"``: the platform failed (sandbox lost, timeout, server error): the episode
    is retried or masked, never scored as the agent's failure. ``kind="agent"``: the agent's
    own doing (e.g. it exceeded the context budget).
    """

    kind: FailureKind
    stage: str  # "sandbox_start" | "env_reset" | "env_step" | "generation" | "reward" | ...
    error: str  # exception class name
    message: str
    retries: int = 0


@dataclass
class TrainSample:
    """One training row (token-aligned lists of equal length)."""

    input_ids: list[int]
    response_mask: list[int]
    old_logprobs: list[float]
    reward: float
    group_id: str
    episode_id: str
    weight_version: int
    #: per token, the ids the policy chose among (an empty tuple: any; see :attr:`Turn.allowed`); None: no restriction
    allowed: list[tuple[int, ...]] | None = None


@dataclass
class Trajectory:
    """One episode of one env, as produced by an env manager."""

    episode_id: str
    group_id: str
    env_id: str
    seed: int
    env_tag: str = ""
    turns: list[Turn] = field(default_factory=list)
    final_reward: float = 0.0
    success: bool = False
    terminated: bool = False
    truncated: bool = False
    failure: FailureTag | None = None
    wall_time_s: float = 0.0
    infra_retries: int = 0  # fresh starts after infra failures (also on episodes that then finished)
    #: the env's info of the last step (what a reward function or the adaptive test timeouts read)
    last_info: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def masked(self) -> bool:
        """Infra failures are excluded from training."""
        return self.failure is not None and self.failure.kind == "infra"

    @property
    def total_reward(self) -> float:
        return sum(t.reward for t in self.turns)

    @property
    def weight_versions(self) -> list[int]:
        return [t.weight_version for t in self.turns]

    @property
    def oldest_weight_version(self) -> int:
        return min(self.weight_versions, default=0)

    def metrics(self) -> dict[str, float]:
        """Env metrics of the episode (means over turns where it applies)."""
        n = len(self.turns)
        return {
            "success": float(self.success),
            "turns": float(n),
            "action_is_valid": sum(t.action_is_valid for t in self.turns) / n if n else 0.0,
            "action_is_effective": sum(t.action_is_effective for t in self.turns) / n if n else 0.0,
            "total_reward": self.total_reward,
            "response_tokens": float(sum(len(t.response_ids) for t in self.turns)),
        }

    def to_samples(
        self, layout: Literal["concat", "per_turn", "auto"] = "concat", reward: float | None = None
    ) -> list[TrainSample]:
        """Training rows for this episode, every row carrying ``reward`` (default: final reward)."""
        r = self.final_reward if reward is None else reward
        if not self.turns:
            return []
        if not all(t.tokens_exact for t in self.turns):
            raise ValueError(
                "this episode was played through a chat server (its token ids were re-tokenised from text): "
                "it is for playing and evaluation, not training"
            )
        version = self.oldest_weight_version
        if layout == "per_turn":
            return [self.turn_sample(t, r, version) for t in self.turns]
        if layout == "auto":
            return [self.concat_sample(seg, r, min(t.weight_version for t in seg)) for seg in self.segments()]
        if layout != "concat":
            raise ValueError(f"layout must be 'concat', 'per_turn' or 'auto', got {layout!r}")
        for i, t in enumerate(self.turns[1:], 1):
            if not _extends(self.turns[i - 1], t):
                raise ValueError(
                    f"turn {i}'s prompt does not extend the conversation so far; use layout='per_turn' "
                    "(history was truncated or re-templated)"
                )
        return [self.concat_sample(self.turns, r, version)]

    def segments(self) -> list[list[Turn]]:
        """The turns in runs that extend each other token for token (each turn's prompt starts with the run's
        conversation so far): the rows of the ``auto`` layout."""
        out: list[list[Turn]] = []
        for t in self.turns:
            if out and _extends(out[-1][-1], t):
                out[-1].append(t)
            else:
                out.append([t])
        return out

    def concat_sample(self, turns: list[Turn], reward: float, version: int) -> TrainSample:
        """One row of ``turns`` (each extending the ones before): every response trained, the rest masked."""
        ids: list[int] = []
        mask: list[int] = []
        lps: list[float] = []
        allowed: list[tuple[int, ...]] = []
        for t in turns:
            new_context = t.prompt_ids[len(ids) :]
            ids += new_context + t.response_ids
            mask += [0] * len(new_context) + [1] * len(t.response_ids)
            lps += [0.0] * len(new_context) + list(t.logprobs)
            allowed += [()] * len(new_context) + list(t.allowed or [()] * len(t.response_ids))
        restricted = any(t.allowed is not None for t in turns)
        return TrainSample(
            ids, mask, lps, reward, self.group_id, self.episode_id, version, allowed if restricted else None
        )

    def turn_sample(self, t: Turn, reward: float, version: int) -> TrainSample:
        """The ``per_turn`` training row of turn ``t``: its prompt and response, the response's tokens trained."""
        return TrainSample(
            input_ids=t.prompt_ids + t.response_ids,
            response_mask=[0] * len(t.prompt_ids) + [1] * len(t.response_ids),
            old_logprobs=[0.0] * len(t.prompt_ids) + list(t.logprobs),
            reward=reward,
            group_id=self.group_id,
            episode_id=self.episode_id,
            weight_version=version,
            allowed=None if t.allowed is None else [()] * len(t.prompt_ids) + list(t.allowed),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _extends(prev: Turn, t: Turn) -> bool:
    """Whether ``t``'s prompt starts with ``prev``'s prompt and response, token for token (when ``prev`` extended
    the turns before it, so does ``t``: its prompt holds the whole conversation so far)."""
    head = prev.prompt_ids + prev.response_ids
    return t.prompt_ids[: len(head)] == head
