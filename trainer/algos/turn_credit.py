"""Step-level credit for multi-turn episodes: one advantage per turn, as pure Python functions.

:func:`turn_advantages` takes :class:`TurnEpisode` s, picks a mode from :data:`TURN_CREDIT_MODES`
(``episode``, ``gigpo``, ``fork``, ``gae``) and returns a :class:`TurnCredit`: ``advantages[i][t]``
for turn ``t`` of episode ``i`` (to spread over that turn's response tokens), critic targets for
``gae``, and metrics under ``turn_credit/``.

The episode return is ``R = sum(rewards)`` (undiscounted): an env that scores only at the end puts
the score on the last turn (:func:`episode_from_trajectory` does so for a custom final reward).
Episodes with no turns get ``[]`` and stay out of all group statistics; stds are unbiased.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from rockroll.trainer.algos.advantages import discounted_returns, group_index
from rockroll.trainer.algos.registry import Registry

__all__ = ["TURN_CREDIT_MODES", "TurnCredit", "TurnCreditConfig", "TurnEpisode", "register_turn_credit"]
__all__ += ["turn_advantages", "episode_advantages", "gigpo_advantages", "fork_advantages", "gae_turn_advantages"]
__all__ += ["continuation_return", "fork_value", "episode_from_trajectory"]

P = "turn_credit"


def _seq(xs: Sequence[Any], what: str, n: int | None = None, none_ok: bool = False, conv: type = float) -> tuple:
    """``conv`` of each entry (None kept if ``none_ok``), finite floats, exactly ``n`` when given."""
    out = tuple(None if x is None and none_ok else conv(x) for x in xs)
    if n is not None and len(out) != n:
        raise ValueError(f"{what} has {len(out)} entries for {n} turns: give exactly one per turn")
    if any(isinstance(x, float) and not math.isfinite(x) for x in out):
        raise ValueError(f"{what} holds a NaN or infinite value: {list(out)}")
    return out


@dataclass(frozen=True)
class TurnEpisode:
    """One episode's per-turn signals; per-turn sequences hold one entry per turn (copied to tuples)."""

    group_id: str  # episodes of one group share the task/seed and are compared with each other
    rewards: Sequence[float]  # the env's reward after each turn
    state_keys: Sequence[str] | None = None  # key (hash) of the state the policy acted from (gigpo)
    success: bool | None = None  # the episode's success flag, for metrics only
    values: Sequence[float] | None = None  # critic value at each turn's last prompt token (gae)
    fork_values: Sequence[float | None] | None = None  # V(s_t) from forks, None where not forked (fork)
    truncated: bool = False  # cut by a step/time limit rather than ended by the env (gae bootstraps)
    last_value: float | None = None  # critic value of the state after the last turn, if truncated (gae)

    def __post_init__(self) -> None:
        n, put = len(self.rewards), object.__setattr__
        put(self, "rewards", _seq(self.rewards, "rewards"))
        if self.state_keys is not None:
            put(self, "state_keys", _seq(self.state_keys, "state_keys", n, conv=str))
        if self.values is not None:
            put(self, "values", _seq(self.values, "values", n))
        if self.fork_values is not None:
            put(self, "fork_values", _seq(self.fork_values, "fork_values", n, none_ok=True))
        if self.last_value is not None:
            put(self, "last_value", _seq([self.last_value], "last_value")[0])


def episode_from_trajectory(traj: Any, *, reward: Literal["turns", "final"] = "turns", **extra: Any) -> TurnEpisode:
    """A :class:`TurnEpisode` from an agentrl ``Trajectory`` (read by attribute, not imported).

    ``reward="final"`` adds ``traj.final_reward - sum(turn rewards)`` to the last turn's reward, so
    ``R`` equals the trajectory's final reward while per-turn rewards keep their timing. ``extra``
    fills the other fields (``values=``, ``fork_values=``, ``last_value=``).
    """
    if reward not in ("turns", "final"):
        raise ValueError(f"reward must be 'turns' or 'final', got {reward!r}")
    rewards = [float(t.reward) for t in traj.turns]
    if reward == "final" and rewards:
        rewards[-1] += float(traj.final_reward) - sum(rewards)
    keys = [t.state_key for t in traj.turns]
    return TurnEpisode(traj.group_id, rewards, keys, success=traj.success, truncated=bool(traj.truncated), **extra)


@dataclass
class TurnCredit:
    """``advantages[i][t]`` per episode and turn; ``returns`` likewise for ``"gae"`` (else None)."""

    advantages: list[list[float]]
    returns: list[list[float]] | None = None
    metrics: dict[str, float] = field(default_factory=dict)


TurnCreditFn = Callable[[Sequence[Any], "TurnCreditConfig"], TurnCredit]
#: mode name -> ``fn(episodes, config) -> TurnCredit``.
TURN_CREDIT_MODES: Registry[TurnCreditFn] = Registry("turn credit mode", "mode")


def register_turn_credit(name: str, *, override: bool = False) -> Callable[[TurnCreditFn], TurnCreditFn]:
    """Decorator: make ``fn(episodes, config) -> TurnCredit`` selectable as ``mode=name``."""
    return lambda fn: TURN_CREDIT_MODES.add(name, fn, override=override)


@dataclass(frozen=True)
class TurnCreditConfig:
    """Which estimator and its knobs; a mode ignores the fields it does not use."""

    mode: str = "episode"  # a name in TURN_CREDIT_MODES: episode | gigpo | fork | gae
    gamma: float = 0.95  # discount over turns (GiGPO's default); gigpo, fork, gae
    lam: float = 0.95  # GAE lambda; gae
    norm_std: bool = True  # divide the episode advantage by its group's std (False: Dr. GRPO)
    step_weight: float = 1.0  # weight of the anchor-state advantage; gigpo
    step_norm_std: bool = (
        False  # divide the step advantage by its step group's std (hurt: configs/README.md, step-level credit)
    )
    eps: float = 1e-6  # added to every std

    def __post_init__(self) -> None:
        TURN_CREDIT_MODES.get(self.mode)  # UnknownNameError (a ValueError) listing the known modes
        if not (0 <= self.gamma <= 1 and 0 <= self.lam <= 1 and self.step_weight >= 0 and self.eps >= 0):
            raise ValueError(f"need gamma and lam in [0, 1], step_weight >= 0 and eps >= 0; got {self}")


def _episodes(episodes: Sequence[TurnEpisode | Mapping[str, Any]]) -> list[TurnEpisode]:
    out = []
    for i, ep in enumerate(episodes):
        try:
            out.append(ep if isinstance(ep, TurnEpisode) else TurnEpisode(**ep))
        except (TypeError, ValueError) as e:
            gid = ep.get("group_id") if isinstance(ep, Mapping) else getattr(ep, "group_id", None)
            raise ValueError(f"episode {i} (group {gid!r}): {e}") from e
    return out


def _equal(xs: Sequence[float]) -> bool:
    """All equal up to float rounding (``0.1 + 0.2`` vs ``0.3``, which a std would blow up to +-0.7)."""
    return max(xs) - min(xs) <= 1e-9 * max(1.0, max(map(abs, xs)))


def _centre(xs: Sequence[float], norm_std: bool, eps: float) -> list[float]:
    """``x - mean``, divided by ``std + eps`` when ``norm_std``; a lone or all-equal set gets 0."""
    if len(xs) < 2 or _equal(xs):
        return [0.0] * len(xs)
    m = sum(xs) / len(xs)
    s = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) + eps if norm_std else 1.0
    return [(x - m) / s for x in xs]


def _metrics(eps: list[TurnEpisode], adv: list[list[float]]) -> dict[str, float]:
    flat = [a for row in adv for a in row]
    live = [e for e in eps if e.rewards]
    groups = group_index([e.group_id for e in live])
    flat_groups = sum(len(g) > 1 and _equal([sum(live[i].rewards) for i in g]) for g in groups)
    m = {
        f"{P}/episodes": float(len(eps)),
        f"{P}/empty_episodes": float(len(eps) - len(live)),
        f"{P}/turns": float(len(flat)),
        f"{P}/return_mean": _mean([sum(e.rewards) for e in live]),
        f"{P}/adv_mean": _mean(flat),
        f"{P}/adv_abs_mean": _mean([abs(a) for a in flat]),
        f"{P}/single_episode_groups": float(sum(len(g) == 1 for g in groups)),
        f"{P}/equal_return_groups": float(flat_groups),
    }
    flags = [float(e.success) for e in eps if e.success is not None]
    if flags:
        m[f"{P}/success_rate"] = _mean(flags)
    return m


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _episode_level(eps: list[TurnEpisode], cfg: TurnCreditConfig) -> list[float]:
    """One GRPO-style advantage per episode (0 for empty episodes and groups of one)."""
    out = [0.0] * len(eps)
    live = [i for i, e in enumerate(eps) if e.rewards]
    for g in group_index([eps[i].group_id for i in live]):
        idx = [live[j] for j in g]
        for i, a in zip(idx, _centre([sum(eps[i].rewards) for i in idx], cfg.norm_std, cfg.eps), strict=True):
            out[i] = a
    return out


@register_turn_credit("episode")
def episode_advantages(episodes: Sequence[Any], cfg: TurnCreditConfig) -> TurnCredit:
    """``(R - mean_g R) / (std_g R + eps)``, the same on every turn of the episode.

    ``norm_std=False`` keeps only the mean-centring (Dr. GRPO). Good and bad turns of one episode
    get the same credit.
    """
    eps = _episodes(episodes)
    adv = [[a] * len(e.rewards) for a, e in zip(_episode_level(eps, cfg), eps, strict=True)]
    return TurnCredit(adv, None, _metrics(eps, adv))


@register_turn_credit("gigpo")
def gigpo_advantages(episodes: Sequence[Any], cfg: TurnCreditConfig) -> TurnCredit:
    """Episode advantage plus ``step_weight`` times an anchor-state advantage (GiGPO, arXiv 2505.10978).

    Inside a group, every turn acted from the same ``state_key`` (in any episode, revisits included)
    joins one step group. A turn's step advantage is its discounted return ``G_t`` minus its step
    group's mean ``G`` (also divided by the step group's std when ``step_norm_std``; off by default,
    as tiny discount gaps then blow up to +-1). A turn alone in its step group gets 0, so with no
    shared state this is "episode". ``G_t`` is not bootstrapped past a truncation.
    """
    eps = _episodes(episodes)
    for i, e in enumerate(eps):
        if e.rewards and e.state_keys is None:
            raise ValueError(f"episode {i} (group {e.group_id!r}): 'gigpo' needs state_keys, one per turn")
    ep_adv = _episode_level(eps, cfg)
    g = [discounted_returns(e.rewards, cfg.gamma) for e in eps]
    step = [[0.0] * len(e.rewards) for e in eps]
    cells = [(i, t) for i, e in enumerate(eps) for t in range(len(e.rewards))]
    shared = 0
    for members in group_index([(eps[i].group_id, eps[i].state_keys[t]) for i, t in cells]):
        turns = [cells[j] for j in members]
        shared += len(turns) if len(turns) > 1 else 0
        for (i, t), a in zip(turns, _centre([g[i][t] for i, t in turns], cfg.step_norm_std, cfg.eps), strict=True):
            step[i][t] = a
    adv = [[ep_adv[i] + cfg.step_weight * s for s in row] for i, row in enumerate(step)]
    m = _metrics(eps, adv)
    m[f"{P}/step_grouped_fraction"] = shared / max(len(cells), 1)
    m[f"{P}/step_adv_abs_mean"] = _mean([abs(s) for row in step for s in row])
    return TurnCredit(adv, None, m)


def continuation_return(rewards: Sequence[float], *, gamma: float = 0.95, bootstrap: float = 0.0) -> float:
    """Return of one continuation forked at ``s_t``: ``sum_k gamma^k r_k + gamma^H * bootstrap``.

    ``rewards`` start with the continuation's own action at ``s_t``; ``H = len(rewards)``. A
    continuation cut before the episode ends is biased unless ``bootstrap`` estimates the rest.
    """
    return sum(gamma**k * float(r) for k, r in enumerate(rewards)) + gamma ** len(rewards) * float(bootstrap)


def fork_value(continuation_returns: Sequence[float]) -> float:
    """``V(s_t)``: the mean of K continuation returns (see :func:`continuation_return`).

    If each continuation samples a fresh action at ``s_t`` from the current policy, the mean is an
    unbiased Monte Carlo estimate of ``V(s_t)``, with variance ``Var(G) / K``. Leave the episode's
    own return from ``s_t`` out: a baseline that depends on the action taken biases the gradient.
    """
    if len(continuation_returns) == 0:
        raise ValueError("fork_value needs at least one continuation return (K >= 1)")
    return _mean([float(x) for x in continuation_returns])


@register_turn_credit("fork")
def fork_advantages(episodes: Sequence[Any], cfg: TurnCreditConfig) -> TurnCredit:
    """``G_t - V(s_t)`` on forked turns, the "episode" advantage on the other turns.

    ``V(s_t)`` comes from :func:`fork_value` with the same ``gamma``; it depends on the state only,
    so the advantage is unbiased and needs no group. Forked turns are on the return's scale, while
    ``norm_std=True`` makes the fallback turns z-scores: prefer ``norm_std=False`` then.
    """
    eps = _episodes(episodes)
    ep_adv = _episode_level(eps, cfg)
    adv, forked = [], 0
    for i, e in enumerate(eps):
        g = discounted_returns(e.rewards, cfg.gamma)
        fv = e.fork_values or (None,) * len(e.rewards)
        adv.append([ep_adv[i] if v is None else g[t] - v for t, v in enumerate(fv)])
        forked += sum(v is not None for v in fv)
    m = _metrics(eps, adv)
    m[f"{P}/forked_fraction"] = forked / max(int(m[f"{P}/turns"]), 1)
    return TurnCredit(adv, None, m)


@register_turn_credit("gae")
def gae_turn_advantages(episodes: Sequence[Any], cfg: TurnCreditConfig) -> TurnCredit:
    """GAE over turns with a critic; ``returns = advantages + values`` are the critic's targets.

    ``delta_t = r_t + gamma V_{t+1} - V_t``, ``A_t = delta_t + gamma lam A_{t+1}``; groups play no part.
    After the last turn ``V`` is 0 if the env ended the episode, ``last_value`` if it was truncated.
    """
    eps = _episodes(episodes)
    adv, rets = [], []
    for i, e in enumerate(eps):
        if e.rewards and (e.values is None or (e.truncated and e.last_value is None)):
            need = "values, one critic value per turn" if e.values is None else "last_value (it was truncated)"
            raise ValueError(f"episode {i} (group {e.group_id!r}): 'gae' needs {need}")
        vals = e.values or ()
        nxt, run, a = (e.last_value if e.truncated else 0.0), 0.0, [0.0] * len(e.rewards)
        for t in range(len(e.rewards) - 1, -1, -1):
            run = e.rewards[t] + cfg.gamma * nxt - vals[t] + cfg.gamma * cfg.lam * run
            a[t], nxt = run, vals[t]
        adv.append(a)
        rets.append([x + v for x, v in zip(a, vals, strict=True)])
    m = _metrics(eps, adv)
    m[f"{P}/value_mean"] = _mean([v for e in eps for v in (e.values or ())])
    return TurnCredit(adv, rets, m)


def turn_advantages(
    episodes: Sequence[TurnEpisode | Mapping[str, Any]], config: TurnCreditConfig | None = None, **overrides: Any
) -> TurnCredit:
    """Per-turn advantages by ``config.mode``; ``overrides`` replace config fields (``mode="gigpo"``)."""
    if unknown := sorted(set(overrides) - set(known := [f.name for f in fields(TurnCreditConfig)])):
        raise ValueError(f"unknown turn credit option(s) {unknown}: TurnCreditConfig has {', '.join(known)}")
    cfg = replace(config or TurnCreditConfig(), **overrides)
    return TURN_CREDIT_MODES.get(cfg.mode)(_episodes(episodes), cfg)
