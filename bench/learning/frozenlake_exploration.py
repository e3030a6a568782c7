"""Where a model's greedy choice on slippery FrozenLake is suboptimal, how likely is it to try an optimal one?

    .venv/bin/python bench/learning/frozenlake_exploration.py --model runs/NAME/export/warmstart [--model DIR ...]
                                                     [--seeds 1000000:1000100] [--steps 20] [--temps 1 1.5 2]

RL can only move a policy towards actions it samples. For every non-terminal cell of the held-out
maps this asks the model (the prompt it sees with ``rollout.episode.history_k: 0``, built as
``frozenlake_exact_eval.cell_prompts`` builds it from the settings recorded beside the export) for its distribution over the four actions, and scores each
action exactly with ``--steps`` steps left (:func:`rockroll.envs.frozenlake.exact.action_values`).
Printed per model: the share of cells where the greedy action is suboptimal (by more than 0.001),
the mean success lost there, and the probability mass the model puts on an optimal action at those
cells when sampling at each temperature (mean and median over the cells): the four answers'
probabilities (each the product of its tokens') tempered and renormalised among themselves, so
junk answers are left out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make ``bench.*`` importable
    sys.path.insert(0, str(ROOT))

from bench.learning.frozenlake_exact_eval import cell_prompts  # noqa: E402
from bench.learning.frozenlake_refs import _seed_range  # noqa: E402
from rockroll.agentrl.models.tiny import load_model_and_tokenizer  # noqa: E402
from rockroll.envs.frozenlake.exact import action_values  # noqa: E402
from rockroll.envs.frozenlake.maps import ACTIONS  # noqa: E402


def action_logprobs(model, tok, prompts: list[list[int]]) -> np.ndarray:
    """``[len(prompts), 4]`` log-probabilities of answering each action (summed over its tokens)."""
    import torch

    answers = [tok.encode(f"<answer>{a}</answer>", add_special_tokens=False) for a in ACTIONS]
    rows, owners = [], []
    for i, p in enumerate(prompts):
        for a, ids in enumerate(answers):
            rows.append((p, ids))
            owners.append((i, a))
    out = np.zeros((len(prompts), 4))
    with torch.no_grad():
        for start in range(0, len(rows), 512):
            chunk = rows[start : start + 512]
            width = max(len(p) + len(a) for p, a in chunk)
            ids = torch.full((len(chunk), width), tok.pad_token_id)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for j, (p, a) in enumerate(chunk):
                seq = p + a
                ids[j, : len(seq)] = torch.tensor(seq)
                mask[j, : len(seq)] = 1
            logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), -1)
            for j, (p, a) in enumerate(chunk):
                pos = torch.arange(len(p) - 1, len(p) + len(a) - 1)
                i, act = owners[start + j]
                out[i, act] = float(logp[j, pos, torch.tensor(a)].sum())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", action="append", required=True, help="model directory (repeatable)")
    p.add_argument("--seeds", default="1000000:1000100", help="held-out map seeds, START:STOP")
    p.add_argument("--steps", type=int, default=20, help="steps left at which actions are scored")
    p.add_argument("--temps", type=float, nargs="+", default=[1.0, 1.5, 2.0])
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    seeds = _seed_range(args.seeds)
    for path in args.model:
        model, tok = load_model_and_tokenizer(path)
        model.eval()
        maps, where, prompts, _, _ = cell_prompts(Path(path), tok, seeds, 4)
        qs = [action_values(grid, args.steps)[args.steps] for grid in maps]
        gaps = np.array([qs[m][:, r * 4 + c] - qs[m][:, r * 4 + c].max() for m, r, c in where])  # 0: optimal
        lp = action_logprobs(model, tok, prompts)
        greedy = lp.argmax(1)
        lost = -gaps[np.arange(len(gaps)), greedy]
        bad = lost > 1e-3
        print(
            f"{path}: {len(gaps)} cells of {len(seeds)} maps; greedy suboptimal at {bad.mean():.1%} "
            f"(mean success lost there {lost[bad].mean() if bad.any() else 0:.3f})"
        )
        for temp in args.temps:
            w = np.exp((lp - lp.max(1, keepdims=True)) / temp)
            w /= w.sum(1, keepdims=True)
            mass = (w * (gaps > -1e-9)).sum(1)[bad]
            print(f"  T={temp:g}: mass on an optimal action where greedy is suboptimal: mean {mass.mean():.4f}, "
                  f"median {np.median(mass):.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
