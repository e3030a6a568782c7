"""How far supervision with exact labels takes a warm start on held-out slippery FrozenLake maps.

    .venv/bin/python bench/learning/frozenlake_oracle_sft.py --model runs/NAME/export/warmstart
                     [--train-maps 2000] [--steps 1200] [--batch 64] [--lr 1e-3] [--evals 6]
                     [--seeds 1000000:1000300] [--step-limit 20] [--save DIR]

An upper bound for any RL run that starts from the same model and has to find the better actions
itself. Each training map (seeds 0 .. train-maps - 1, disjoint from the held-out ones) labels every
non-terminal cell with its optimal action (``exact.action_values`` with the whole step budget
left, a stationary table), and the model is trained on those answers exactly as the warm start is
(the rollout's prompt at that cell, loss on the answer tokens). Every ``steps / evals`` steps the
greedy policy is scored exactly on the held-out maps (``frozenlake_exact_eval``: the model asked at
every cell, the table scored by dynamic programming over the slips). Columns: step, labelled
examples seen, exact greedy success, agreement of the greedy action with the label.

An RL run learns the same thing from returns instead of labels; where this bench needs N labelled
cells to reach a success, an RL run needs at least as many cells whose better action its returns
single out (see configs/README.md, "What limits it").
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make ``bench.*`` importable
    sys.path.insert(0, str(ROOT))

from bench.learning.frozenlake_exact_eval import _greedy, cell_prompts  # noqa: E402
from bench.learning.frozenlake_refs import _seed_range  # noqa: E402
from rockroll.agentrl.engines.hf import HFEngine  # noqa: E402
from rockroll.agentrl.models.tiny import load_model_and_tokenizer  # noqa: E402
from rockroll.envs.frozenlake.exact import action_values, expert_policy, policy_success, references  # noqa: E402
from rockroll.envs.frozenlake.maps import ACTIONS  # noqa: E402
from rockroll.trainer.evaluation.exact import cell_action  # noqa: E402


def labels(maps: list, where: list, steps: int) -> list[int]:
    """The optimal action index at each ``(map, row, col)`` with ``steps`` steps left."""
    q = [action_values(g, steps)[steps] for g in maps]
    size = len(maps[0])
    return [int(np.argmax(q[m][:, r * size + c])) for m, r, c in where]


def expert_labels(maps: list, where: list) -> list[int]:
    """The re-planning no-slip expert's action at each ``(map, row, col)`` (the multi-turn warm start's teacher,
    here at every cell, not only along its own episodes)."""
    tables = [expert_policy(g) for g in maps]
    return [tables[m][(r, c)] for m, r, c in where]


def table_success(maps: list, where: list, actions: list[int], steps: int) -> float:
    policies: list[dict[tuple[int, int], int]] = [{} for _ in maps]
    for (m, r, c), a in zip(where, actions, strict=True):
        policies[m][(r, c)] = a
    return float(np.mean([policy_success(g, steps, p) for g, p in zip(maps, policies, strict=True)]))


def greedy_actions(model, tok, prompts: list[list[int]], max_new: int) -> list[int | None]:  # noqa: ANN001
    from rockroll.trainer.learner.models import frozen_copy

    engine = HFEngine(model=frozen_copy(model), tokenizer=tok, max_batch_size=256, seed=0)
    answers = asyncio.run(_greedy(engine, prompts, max_new, False))  # as the model answers unrestricted
    return [cell_action(tok.decode(ids, skip_special_tokens=True)) for ids in answers]


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--model", type=Path, required=True, help="an exported multi-turn model (rollout.episode.history_k 0)"
    )
    p.add_argument("--train-maps", type=int, default=2000)
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--evals", type=int, default=6, help="evaluations over the run")
    p.add_argument("--seeds", type=_seed_range, default=range(1_000_000, 1_000_300), help="A:B held-out maps")
    p.add_argument("--step-limit", type=int, default=20, help="FrozenLake-v0: 20")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--save", type=Path, default=None, help="save the trained model here")
    p.add_argument(
        "--labels",
        choices=["optimal", "expert"],
        default="optimal",
        help="optimal: the exact best action; expert: the re-planning no-slip expert's (a warm start on every cell)",
    )
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model, tok = load_model_and_tokenizer(args.model)
    train_maps, train_where, train_prompts, max_new, _ = cell_prompts(args.model, tok, list(range(args.train_maps)), 4)
    test_maps, test_where, test_prompts, _, _ = cell_prompts(args.model, tok, list(args.seeds), 4)
    if args.labels == "expert":
        y_train = expert_labels(train_maps, train_where)
    else:
        y_train = labels(train_maps, train_where, args.step_limit)
    y_test = labels(test_maps, test_where, args.step_limit)
    refs = references(list(args.seeds), size=4, steps=args.step_limit)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    answers = [tok.encode(f"<answer>{a}</answer>", add_special_tokens=False) + [eos] for a in ACTIONS]
    seqs = [pr + answers[y] for pr, y in zip(train_prompts, y_train, strict=True)]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), int(tok.pad_token_id or 0))
    attn = torch.zeros_like(ids)
    target = torch.full_like(ids, -100)  # loss on the answer tokens only
    for i, (pr, s) in enumerate(zip(train_prompts, seqs, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        attn[i, : len(s)] = 1
        target[i, len(pr) - 1 : len(s) - 1] = torch.tensor(s[len(pr) :])
    print(
        f"{len(seqs)} labelled cells on {args.train_maps} training maps, {len(test_prompts)} held-out cells on "
        f"{len(test_maps)} maps ({time.perf_counter() - t0:.0f} s)\n"
        f"held-out references: optimum (VI) {100 * np.mean(refs['optimal']):.1f}%, the labels' own table "
        f"{100 * table_success(test_maps, test_where, y_test, args.step_limit):.1f}%, "
        f"re-planning expert {100 * np.mean(refs['expert']):.1f}%",
        flush=True,
    )

    def evaluate(step: int) -> None:
        acts = greedy_actions(model, tok, test_prompts, max_new)
        agree = np.mean([a == y for a, y in zip(acts, y_test, strict=True)])
        success = table_success(test_maps, test_where, [0 if a is None else a for a in acts], args.step_limit)
        print(
            f"| {step} | {step * args.batch} | {100 * success:.1f}% | {100 * agree:.1f}% | "
            f"{time.perf_counter() - t0:.0f} s |",
            flush=True,
        )

    print("\n| step | labelled examples seen | exact greedy success | agreement with the label | wall |")
    print("|---|---|---|---|---|")
    evaluate(0)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(0)
    model.train()
    every = max(1, args.steps // max(1, args.evals))
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(seqs), (args.batch,), generator=gen)
        logits = model(input_ids=ids[idx], attention_mask=attn[idx]).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), target[idx].flatten(), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % every == 0 or step == args.steps:
            model.eval()
            evaluate(step)
            model.train()
    if args.save is not None:
        model.save_pretrained(args.save)
        tok.save_pretrained(args.save)


if __name__ == "__main__":
    main()
