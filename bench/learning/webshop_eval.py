"""WebShop held-out evaluation of exported models: success, score, the score's parts, actions per episode.

Each model directory (a run's ``export/warmstart``, ``export/final``, ...) plays the same held-out goals
greedily, the way the trainer's evaluation plays them: the env manager of ``rockroll.agentrl.eval.run`` with
the episode settings the run exported beside the model (``EPISODE_FILE``: prompt format, turn and token
limits) and the run's env kwargs. The seeds default to the trainer's eval seeds (``rollout.eval_seed_offset``
onwards, never trained on). The score's parts come from the final step's ``info["reward_details"]``:
type (``r_type``), attributes and options (matched / asked, pooled over episodes), price (``price_ok``);
an episode that never buys scores 0 and has no parts.

    python bench/learning/webshop_eval.py runs/NAME/export/warmstart runs/NAME/export/final --episodes 200
"""

from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path
from typing import Any

from rockroll.agentrl.eval.config import EPISODE_FILE
from rockroll.agentrl.eval.run import run_eval
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.sources.kinds import LocalSource

EVAL_SEED_OFFSET = 1_000_000  # the trainer's default rollout.eval_seed_offset


class _Recorded:
    """An env that keeps its last step's ``info`` per seed (the rest is the env's own)."""

    def __init__(self, env: Any, finals: dict[int, dict[str, Any]], lock: threading.Lock) -> None:
        self._env, self._finals, self._lock, self._seed = env, finals, lock, None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self._seed = seed
        return self._env.reset(seed=seed, options=options)

    def step(self, action: str) -> Any:
        out = self._env.step(action)
        with self._lock:
            self._finals[self._seed] = out[4]
        return out


class RecordingSource(LocalSource):
    """In-process envs whose last ``info`` per seed ends up in :attr:`finals`."""

    def __init__(self) -> None:
        super().__init__()
        self.finals: dict[int, dict[str, Any]] = {}
        self._info_lock = threading.Lock()

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        return _Recorded(super()._open(env_id, kwargs), self.finals, self._info_lock)


def evaluate_model(model_dir: Path, seeds: list[int], threads: int) -> dict[str, float]:
    """Play ``seeds`` greedily with the model in ``model_dir``; the table row of that model."""
    recorded = json.loads((model_dir / EPISODE_FILE).read_text())
    (env,) = recorded["envs"]
    episode = {**{k: v for k, v in recorded.items() if k in EpisodeConfig.model_fields}, "temperature": 0.0}
    config = {
        "name": str(model_dir),
        "engine": {"kind": "hf", "args": {"model_path": str(model_dir), "device": "cpu", "num_threads": threads}},
        "envs": [{"env": env["env_id"], "seeds": seeds, "episodes": len(seeds), "kwargs": env["env_kwargs"]}],
        "episode": episode,
        "concurrency": 64,
    }
    source = RecordingSource()
    report = run_eval(config, source=source, progress=False)
    records = [e for e in report.episodes if not e["masked"]]
    parts = [source.finals.get(e["seed"], {}).get("reward_details") for e in records]
    bought = [p for p in parts if p]
    n = len(records)
    return {
        "episodes": n,
        "masked": len(report.episodes) - n,
        "success": sum(e["success"] for e in records) / n,
        "score": sum(p["reward"] for p in bought) / n,
        "bought": len(bought) / n,
        "type": sum(p["r_type"] for p in bought) / max(1, len(bought)),
        "attributes": sum(p["attr_matches"] for p in bought) / max(1, sum(p["n_attrs"] for p in bought)),
        "options": sum(p["option_matches"] for p in bought) / max(1, sum(p["n_options"] for p in bought)),
        "price": sum(p["price_ok"] for p in bought) / max(1, len(bought)),
        "actions": sum(e["turns"] for e in records) / n,
        "valid": sum(e["valid_actions"] for e in records) / max(1, sum(e["turns"] for e in records)),
        "seconds": report.wall_time_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", type=Path, help="exported model directories")
    ap.add_argument("--episodes", type=int, default=200, help="held-out goals (seeds from --seed-offset)")
    ap.add_argument("--seed-offset", type=int, default=EVAL_SEED_OFFSET, help="the run's rollout.eval_seed_offset")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    seeds = list(range(args.seed_offset, args.seed_offset + args.episodes))
    rows = {str(m): evaluate_model(m, seeds, args.threads) for m in args.models}
    cols = [
        "episodes",
        "masked",
        "success",
        "score",
        "bought",
        "type",
        "attributes",
        "options",
        "price",
        "actions",
        "valid",
    ]
    print("| model | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name, row in rows.items():
        cells = [f"{int(row[c])}" if c in ("episodes", "masked") else f"{row[c]:.3f}" for c in cols]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(
        f"seeds {seeds[0]}..{seeds[-1]}, greedy; bought: share of episodes that bought; type, attributes, options, "
        "price over those that bought (attributes, options: matched / asked); valid: valid actions / actions"
    )


if __name__ == "__main__":
    main()
