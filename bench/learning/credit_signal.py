"""How much of each per-turn credit mode's advantage points the right way, on slippery FrozenLake.

    .venv/bin/python bench/learning/credit_signal.py --model runs/NAME/export/warmstart [--batches 8] [--fork]
                                            [--config configs/frozenlake_slippery.yaml] [key=value ...]

Plays ``--batches`` training batches with the config's rollout (in-process envs, the model's
sampling temperature, groups sharing a map), then scores every turn's action exactly: its regret
``D = Q_k(s, a) - max_b Q_k(s, b)`` (``Q_k`` from dynamic programming over the slips with ``k`` steps
left, :func:`rockroll.envs.frozenlake.exact.action_values`; 0 for an optimal action). Each credit
mode turns the same batches into per-turn advantages; a mode whose advantages track ``D`` moves the
policy towards better actions per sample. Printed per mode:

* ``corr``: correlation of advantage and ``D`` over all turns with a valid action;
* ``optimal`` / ``suboptimal``: mean advantage (in units of the mode's mean |advantage|) of turns
  whose action was optimal / at least 0.01 below the best; ``separation`` is their difference.

Training needs a positive separation; its size per sample says how many samples a gain costs (a
learning run is the final word: ``bench/learning/slippery_seeds.py``). With ``--fork`` the fork mode's
continuations are played too (more rollouts than the other modes: it is not equal-cost).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rockroll.envhub as envhub  # noqa: E402
from rockroll.agentrl.engines.hf import HFEngine  # noqa: E402
from rockroll.agentrl.sources.kinds import LocalSource  # noqa: E402
from rockroll.envs.core import parse_answer  # noqa: E402
from rockroll.envs.frozenlake.exact import action_values  # noqa: E402
from rockroll.envs.frozenlake.maps import ACTIONS  # noqa: E402
from rockroll.trainer.algos.turn_credit import episode_from_trajectory, turn_advantages  # noqa: E402
from rockroll.trainer.config_io import load_config  # noqa: E402
from rockroll.trainer.learner.models import frozen_copy, load_policy  # noqa: E402
from rockroll.trainer.rollout.multiturn import MultiTurnDriver  # noqa: E402

_INDEX = {a.lower(): i for i, a in enumerate(ACTIONS)}

#: name -> turn_advantages options
MODES: dict[str, dict] = {
    "episode (GRPO, std)": {"mode": "episode"},
    "episode (Dr.GRPO, no std)": {"mode": "episode", "norm_std": False},
    "gigpo (std)": {"mode": "gigpo"},
    "gigpo (no std)": {"mode": "gigpo", "norm_std": False},
    "gigpo (no std, step x2)": {"mode": "gigpo", "norm_std": False, "step_weight": 2.0},
}


def regrets(trajs: list, env_kwargs: dict, max_turns: int) -> list[list[float]]:
    """Per episode and turn: the action's regret ``D`` (NaN for an invalid action)."""
    env = envhub.make("FrozenLake-v0", **env_kwargs)
    cache: dict[int, np.ndarray] = {}
    out = []
    for t in trajs:
        env.reset(seed=t.seed)
        inner = env.unwrapped
        if t.seed not in cache:
            cache[t.seed] = action_values(inner.grid, max_turns, slippery=inner.is_slippery)
        q, size = cache[t.seed], inner.size
        row = []
        for k, turn in enumerate(t.turns):
            a = _INDEX.get((parse_answer(turn.action_text) or "").lower())
            cell = inner.row * size + inner.col
            left = max_turns - k
            row.append(np.nan if a is None else float(q[left, a, cell] - q[left, :, cell].max()))
            env.step(turn.action_text)
        out.append(row)
    env.close()
    return out


def score(advantages: list[list[float]], d: list[list[float]]) -> dict[str, float]:
    adv = np.array([a for row in advantages for a in row])
    reg = np.array([x for row in d for x in row])
    ok = ~np.isnan(reg)
    adv, reg = adv[ok], reg[ok]
    scale = float(np.abs(adv).mean()) or 1.0
    best, worse = reg > -1e-9, reg < -0.01
    opt, sub = float(adv[best].mean() / scale), float(adv[worse].mean() / scale)
    return {
        "corr": float(np.corrcoef(adv, reg)[0, 1]),
        "optimal": opt,
        "suboptimal": sub,
        "separation": opt - sub,
        "n_opt": float(best.sum()),
        "n_sub": float(worse.sum()),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="model directory (a warm start: export/warmstart)")
    p.add_argument("--config", default="configs/frozenlake_slippery.yaml")
    p.add_argument("--batches", type=int, default=8, help="training batches to play")
    p.add_argument("--fork", action="store_true", help="also score the fork mode (plays its continuations)")
    p.add_argument("overrides", nargs="*", help="config overrides, key=value")
    args = p.parse_args()
    cfg = load_config(args.config, [f"model.path={args.model}", "model.build_tiny=false", *args.overrides])
    import torch

    torch.set_num_threads(cfg.torch_threads)
    model, tok = load_policy(cfg.model)
    engine = HFEngine(model=frozen_copy(model), tokenizer=tok, max_batch_size=256, seed=cfg.seed)
    driver = MultiTurnDriver(cfg, engine, LocalSource())
    modes = dict(MODES)
    trajs, forks = [], {}
    try:
        for _ in range(args.batches):
            batch, _m = driver.next_batch()
            batch = [t for t in batch if not t.masked and t.turns]
            trajs += batch
            if args.fork:
                forks.update(driver.fork_values(batch)[0])
    finally:
        driver.close()
    if args.fork:
        modes[f"fork (no std, k={cfg.algo.fork_k})"] = {"mode": "fork", "norm_std": False}
    d = regrets(trajs, cfg.rollout.env_kwargs, cfg.rollout.episode.max_turns)
    turns = sum(len(t.turns) for t in trajs)
    print(
        f"{len(trajs)} episodes, {turns} turns, success {np.mean([t.success for t in trajs]):.3f}, "
        f"temperature {cfg.rollout.episode.temperature}, gamma {cfg.algo.step_gamma}, model {args.model}"
    )
    print("| credit | corr(adv, regret) | optimal actions | suboptimal actions | separation |")
    print("|---|---|---|---|---|")
    episodes = [
        episode_from_trajectory(t, **({"fork_values": forks[t.episode_id]} if t.episode_id in forks else {}))
        for t in trajs
    ]
    for name, opts in modes.items():
        credit = turn_advantages(episodes, gamma=cfg.algo.step_gamma, **opts)
        s = score(credit.advantages, d)
        print(
            f"| {name} | {s['corr']:+.3f} | {s['optimal']:+.3f} (n={s['n_opt']:.0f}) | "
            f"{s['suboptimal']:+.3f} (n={s['n_sub']:.0f}) | {s['separation']:+.3f} |"
        )


if __name__ == "__main__":
    main()
