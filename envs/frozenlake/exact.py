"""Exact success rates on FrozenLake maps, by dynamic programming over the slip distribution.

References for the slippery FrozenLake runs (configs/README.md lists them): no sampling, every number is
the exact probability of reaching the goal within ``steps`` steps from the start, under the
rules of :class:`~rockroll.envs.frozenlake.env.FrozenLakeEnv`:

* slippery: the agent moves in the chosen direction or one of the two perpendicular ones, each
  with probability 1/3; moving off the map leaves it in place; a hole or the goal ends the
  episode; reward 1 at the goal. ``steps`` is the ``MaxSteps`` limit (20 for ``FrozenLake-v0``).

Four references, from best to worst on a typical map:

* :func:`optimal_success`: finite-horizon value iteration (time-dependent optimal policy).
* :func:`policy_success`: a stationary closed-loop policy (current cell -> action), e.g.
  :func:`expert_policy`, the re-planning no-slip shortest-path expert of ``expert.py``, or a
  learned policy queried at every cell (valid for a policy that sees the current grid alone).
* :func:`best_blind_success`: beam search over fixed (open-loop) action sequences, a lower bound
  on the best blind plan; :func:`blind_success` scores one sequence.
* :func:`noslip_plan_blind_success`: the no-slip shortest path played blindly.

Blind sequences are scored with the env's own semantics: the episode ends when the goal is
reached, whatever moves remain (the trainer's strict whole-plan scorer, which also rejects
ineffective moves and an early finish, would score lower on slippery ice).

Every function here works on a batch of maps of one size at once (plain numpy arrays over cells
``row * size + col``); the single-map functions are thin wrappers. :func:`references` computes
all of them for the maps of a list of seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rockroll.envs.frozenlake.env import FrozenLakeEnv
from rockroll.envs.frozenlake.exact_batch import (
    ACTION_INDEX,
    Action,
    Grid,
    MapBatch,
    Policy,
    action_index,
    at_start,
    check_steps,
    map_for_seed,
    maps_for_seeds,
)
from rockroll.envs.frozenlake.expert import next_action
from rockroll.envs.frozenlake.maps import ACTIONS, shortest_path

__all__ = [
    "action_values",
    "best_blind_plan",
    "best_blind_success",
    "blind_success",
    "expert_policy",
    "map_for_seed",
    "noslip_plan_blind_success",
    "optimal_policy",
    "optimal_success",
    "policy_success",
    "random_success",
    "references",
]

_KEY_RNG_SEED = 20240607  # fixed projection for de-duplicating beam states
DEFAULT_BEAM = 128


# --------------------------------------------------------------------------- closed-loop values
def _optimal_tables(batch: MapBatch, steps: int, slippery: bool) -> tuple[np.ndarray, np.ndarray]:
    """``values[k]`` (B, N): best success with k steps left; ``actions[k]``: the best action then
    (lowest action index among ties; k = 0 has no action and repeats k = 1's)."""
    values = np.empty((steps + 1, batch.n, batch.cells))
    actions = np.zeros((steps + 1, batch.n, batch.cells), dtype=np.int64)
    values[0] = batch.goal
    for k in range(1, steps + 1):
        q = batch.backup(values[k - 1], slippery)
        actions[k] = q.argmax(axis=1)
        values[k] = batch.settle(q.max(axis=1))
    if steps:
        actions[0] = actions[1]
    return values, actions


def _policy_values(batch: MapBatch, steps: int, probs: np.ndarray, slippery: bool) -> np.ndarray:
    """Success with ``steps`` left under a stationary stochastic policy ``probs`` (B, 4, N)."""
    value = batch.goal.astype(float)
    for _ in range(steps):
        value = batch.settle((batch.backup(value, slippery) * probs).sum(axis=1))
    return value


def optimal_success(grid: Grid, steps: int, slippery: bool = True) -> float:
    """Probability of reaching the goal within ``steps`` steps under the optimal policy.

    Finite-horizon value iteration; the optimal policy may depend on the steps left
    (see :func:`optimal_policy`).
    """
    batch = MapBatch([grid])
    values, _ = _optimal_tables(batch, check_steps(steps), slippery)
    return float(at_start(batch, values[-1])[0])


def action_values(grid: Grid, steps: int, slippery: bool = True) -> np.ndarray:
    """``q[k, a, row * size + col]``: success probability of taking action ``a`` at that cell with
    ``k`` steps left (``k = 1 .. steps``; ``q[0]`` is 0), then playing optimally. A policy's
    action gap at a cell is ``q[k, a] - q[k].max()`` (0 for an optimal action)."""
    batch = MapBatch([grid])
    steps = check_steps(steps)
    values, _ = _optimal_tables(batch, steps, slippery)
    q = np.zeros((steps + 1, 4, batch.cells))
    for k in range(1, steps + 1):
        q[k] = batch.backup(values[k - 1], slippery)[0]
    return q


def optimal_policy(grid: Grid, steps: int, slippery: bool = True) -> Callable[[int, int, int], int]:
    """The optimal time-dependent policy: ``policy(row, col, steps_left) -> action index``."""
    batch = MapBatch([grid])
    steps = check_steps(steps)
    _, actions = _optimal_tables(batch, steps, slippery)
    size = batch.size

    def policy(row: int, col: int, steps_left: int) -> int:
        return int(actions[min(max(steps_left, 0), steps), 0, row * size + col])

    return policy


def _policy_table(batch: MapBatch, policies: Sequence[Policy]) -> np.ndarray:
    """One-hot (B, 4, N) table of stationary policies, queried at every non-terminal cell."""
    probs = np.zeros((batch.n, 4, batch.cells))
    for b, policy in enumerate(policies):
        for s in np.flatnonzero(batch.alive[b]):
            row, col = divmod(int(s), batch.size)
            if callable(policy):
                action = policy(row, col)
            else:
                if (row, col) not in policy:
                    raise ValueError(f"policy has no action for cell {(row, col)} (a non-terminal cell)")
                action = policy[(row, col)]
            probs[b, action_index(action), s] = 1.0
    return probs


def policy_success(grid: Grid, steps: int, policy: Policy, slippery: bool = True) -> float:
    """Exact success of a stationary policy mapping the current cell ``(row, col)`` to an action.

    ``policy`` is a callable ``(row, col) -> action`` or a dict ``{(row, col): action}``
    covering every cell that is not a hole or the goal; an action is an index 0-3 or a name.
    """
    batch = MapBatch([grid])
    value = _policy_values(batch, check_steps(steps), _policy_table(batch, [policy]), slippery)
    return float(at_start(batch, value)[0])


def expert_policy(grid: Grid) -> dict[tuple[int, int], int]:
    """The re-planning no-slip expert at every non-terminal cell: ``{(row, col): action}``.

    Exactly :func:`rockroll.envs.frozenlake.expert.next_action` (first move of a shortest
    hole-free path from the current cell); a cell with no path to the goal gets Left (action 0),
    which cannot matter: no policy reaches the goal from there.
    """
    grid = tuple(grid)
    size = len(grid)
    probe = FrozenLakeEnv(size=size, is_slippery=False)
    probe.grid = grid
    out: dict[tuple[int, int], int] = {}
    for row, line in enumerate(grid):
        for col, tile in enumerate(line):
            if tile in "HG":
                continue
            probe.row, probe.col = row, col
            action = next_action(probe)
            out[(row, col)] = 0 if action is None else ACTION_INDEX[action.lower()]
    return out


def random_success(grid: Grid, steps: int, slippery: bool = True) -> float:
    """Exact success of the uniformly random policy (each action with probability 1/4)."""
    batch = MapBatch([grid])
    probs = np.full((1, 4, batch.cells), 0.25)
    return float(at_start(batch, _policy_values(batch, check_steps(steps), probs, slippery))[0])


# ---------------------------------------------------------------------------- open-loop values
def _blind_values(batch: MapBatch, plans: np.ndarray, lengths: np.ndarray, slippery: bool) -> np.ndarray:
    """Success of open-loop plans (B, T) (only the first ``lengths[b]`` moves are played)."""
    dist = np.zeros((batch.n, batch.cells))
    dist[np.arange(batch.n), batch.start] = 1.0
    success = np.zeros(batch.n)
    rows = np.arange(batch.n)
    for t in range(plans.shape[1]):
        nxt = batch.forward(dist, slippery)[rows, plans[:, t]]
        playing = t < lengths
        success += np.where(playing, (nxt * batch.goal).sum(axis=1), 0.0)
        dist = np.where(playing[:, None], nxt * batch.alive, dist)
    return success


def blind_success(grid: Grid, steps: int, actions: Sequence[Action], slippery: bool = True) -> float:
    """Exact success of playing ``actions`` without looking (truncated to ``steps`` moves).

    The episode ends at the goal (or in a hole) even if moves remain; a shorter sequence is
    played as is (no padding).
    """
    batch = MapBatch([grid])
    plan = [action_index(a) for a in list(actions)[: check_steps(steps)]]
    plans = np.array([plan], dtype=np.int64).reshape(1, len(plan))
    return float(_blind_values(batch, plans, np.array([len(plan)]), slippery)[0])


def _noslip_plans(batch: MapBatch, steps: int) -> tuple[np.ndarray, np.ndarray]:
    plans = np.zeros((batch.n, steps), dtype=np.int64)
    lengths = np.zeros(batch.n, dtype=np.int64)
    for b, grid in enumerate(batch.grids):
        plan = [ACTION_INDEX[a.lower()] for a in (shortest_path(grid) or [])][:steps]
        plans[b, : len(plan)] = plan
        lengths[b] = len(plan)
    return plans, lengths


def noslip_plan_blind_success(grid: Grid, steps: int, slippery: bool = True) -> float:
    """The no-slip shortest path (``maps.shortest_path``, truncated to ``steps``) played blindly."""
    batch = MapBatch([grid])
    plans, lengths = _noslip_plans(batch, check_steps(steps))
    return float(_blind_values(batch, plans, lengths, slippery)[0])


def _beam_search(
    batch: MapBatch, steps: int, beam: int, slippery: bool, heuristic: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Beam search over fixed action sequences of length ``steps``, all maps at once.

    A partial sequence is a distribution over live cells plus the success mass collected so far;
    it is ranked by that mass plus the expected ``heuristic[k]`` (B, N) over the live cells with
    k steps left (by default the square of the optimal closed-loop value: the closed-loop value
    is optimistic for a blind plan, and squaring it discounts cells from which only reacting to
    the slips reaches the goal; on 500 4x4 maps beam 128 came within 0.15 points of beam 1024,
    the plain closed-loop value lost 0.1-0.6 points, no heuristic 1.5-3). Sequences that lead to
    the same distribution are merged (the one with the most success so far is kept: their
    futures are the same). Returns the best success (B,) and its sequence (B, steps).
    """
    n, cells = batch.n, batch.cells
    rows = np.arange(n)[:, None]
    dist = np.zeros((n, 1, cells))
    dist[np.arange(n), 0, batch.start] = 1.0
    success = np.zeros((n, 1))
    plans = np.zeros((n, 1, 0), dtype=np.int64)
    key_proj = np.random.default_rng(_KEY_RNG_SEED).random(cells)
    goal, alive = batch.goal[:, None, None, :], batch.alive[:, None, None, :]
    for t in range(steps):
        k = dist.shape[1]
        nxt = batch.forward(dist, slippery)  # (B, K, 4, N)
        cand_success = (success[:, :, None] + (nxt * goal).sum(-1)).reshape(n, 4 * k)
        nxt = (nxt * alive).reshape(n, 4 * k, cells)
        score = cand_success + (nxt * heuristic[steps - t - 1][:, None, :]).sum(-1)
        # merge candidates with equal distributions: keep the one with the most success so far
        key = np.round(nxt @ key_proj, 12)
        order = np.lexsort((-cand_success, key), axis=-1)
        sorted_key = np.take_along_axis(key, order, axis=1)
        dup = np.zeros_like(order, dtype=bool)
        dup[:, 1:] = sorted_key[:, 1:] == sorted_key[:, :-1]
        np.put_along_axis(score, order, np.where(dup, -np.inf, np.take_along_axis(score, order, axis=1)), axis=1)
        if 4 * k > beam:
            keep = np.argpartition(-score, beam - 1, axis=1)[:, :beam]
        else:
            keep = np.broadcast_to(np.arange(4 * k), (n, 4 * k))
        parent, action = np.divmod(keep, 4)
        dist = nxt[rows, keep]
        success = cand_success[rows, keep]
        plans = np.concatenate([plans[rows, parent], action[:, :, None]], axis=2)
    best = success.argmax(axis=1)
    return success[np.arange(n), best], plans[np.arange(n), best]


def _best_blind(
    batch: MapBatch, steps: int, beam: int, slippery: bool, heuristic: np.ndarray | None = None
) -> tuple[np.ndarray, list[list[int]]]:
    if isinstance(beam, bool) or not isinstance(beam, (int, np.integer)) or beam < 1:
        raise ValueError(f"beam must be a positive int, got {beam!r}")
    if heuristic is None:
        heuristic = _optimal_tables(batch, steps, slippery)[0] ** 2
    found, plans = _beam_search(batch, steps, int(beam), slippery, heuristic)
    # the no-slip plan is a blind plan too: the result never falls below it
    ns_plans, ns_lengths = _noslip_plans(batch, steps)
    ns = _blind_values(batch, ns_plans, ns_lengths, slippery)
    use_ns = ns > found
    best = np.where(use_ns, ns, found)
    out_plans = [[int(a) for a in (ns_plans[b, : ns_lengths[b]] if use_ns[b] else plans[b])] for b in range(batch.n)]
    return best, out_plans


def best_blind_plan(grid: Grid, steps: int, beam: int = DEFAULT_BEAM, slippery: bool = True) -> tuple[float, list[str]]:
    """The best fixed action sequence the beam search finds, and its exact success."""
    batch = MapBatch([grid])
    best, plans = _best_blind(batch, check_steps(steps), beam, slippery)
    return float(best[0]), [ACTIONS[int(a)] for a in plans[0]]


def best_blind_success(grid: Grid, steps: int, beam: int = DEFAULT_BEAM, slippery: bool = True) -> float:
    """A lower bound on the best blind (open-loop) success: beam search over action sequences.

    Never below :func:`noslip_plan_blind_success`; never above :func:`optimal_success`.
    """
    return best_blind_plan(grid, steps, beam, slippery)[0]


# ---------------------------------------------------------------------------------- references
REFERENCE_KEYS = ("optimal", "expert", "best_blind", "noslip_blind", "random")


def _expert_table(batch: MapBatch) -> np.ndarray:
    return _policy_table(batch, [expert_policy(grid) for grid in batch.grids])


def references(
    seeds: Sequence[int],
    size: int = 4,
    p: float = 0.8,
    steps: int = 20,
    *,
    beam: int = DEFAULT_BEAM,
    slippery: bool = True,
) -> dict[str, Any]:
    """Exact references on the maps of ``seeds`` (``reset(seed=...)`` of a ``size`` map).

    Returns a dict of plain Python values:

    * ``seeds``, ``grids``, ``path_len`` (no-slip shortest-path length: the difficulty to split
      by), and one list per reference in :data:`REFERENCE_KEYS` (``optimal``: value iteration;
      ``expert``: the re-planning no-slip expert; ``best_blind``: beam search, a lower bound;
      ``noslip_blind``: the no-slip plan played blindly; ``random``: uniform random actions);
    * ``mean``: the mean of each reference over the maps;
    * ``by_path_len``: ``{length: {"maps": count, <reference>: mean, ...}}``;
    * ``size``, ``p``, ``steps``, ``beam``, ``slippery``.
    """
    steps = check_steps(steps)
    seeds = [int(s) for s in seeds]
    batch = MapBatch(maps_for_seeds(seeds, size, p))
    values, _ = _optimal_tables(batch, steps, slippery)
    best_blind, _ = _best_blind(batch, steps, beam, slippery, heuristic=values**2)
    ns_plans, ns_lengths = _noslip_plans(batch, steps)
    path_len = np.array([len(shortest_path(g) or []) for g in batch.grids])
    table = {
        "optimal": at_start(batch, values[-1]),
        "expert": at_start(batch, _policy_values(batch, steps, _expert_table(batch), slippery)),
        "best_blind": best_blind,
        "noslip_blind": _blind_values(batch, ns_plans, ns_lengths, slippery),
        "random": at_start(batch, _policy_values(batch, steps, np.full((batch.n, 4, batch.cells), 0.25), slippery)),
    }
    by_len: dict[int, dict[str, float | int]] = {}
    for length in sorted(set(path_len.tolist())):
        sel = path_len == length
        by_len[int(length)] = {"maps": int(sel.sum()), **{k: float(v[sel].mean()) for k, v in table.items()}}
    return {
        "size": size,
        "p": p,
        "steps": steps,
        "beam": beam,
        "slippery": slippery,
        "seeds": seeds,
        "grids": [list(g) for g in batch.grids],
        "path_len": path_len.tolist(),
        **{k: v.tolist() for k, v in table.items()},
        "mean": {k: float(v.mean()) for k, v in table.items()},
        "by_path_len": by_len,
    }
