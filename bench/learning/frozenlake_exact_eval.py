"""Exact held-out success of a trained model's greedy policy on slippery FrozenLake (no sampling noise).

    .venv/bin/python bench/learning/frozenlake_exact_eval.py --model runs/NAME/export/final [--model DIR ...]
                                                    [--seeds 1000000:1000500] [--steps 20] [--json PATH]

A model trained with ``rollout.episode.history_k: 0`` sees the current grid alone, so its greedy policy is a
table ``cell -> action`` per map. This asks the model (greedy decoding through the HF engine, with
the prompt settings recorded beside the export, ``rockroll_episode.json``, restricted to the four moves
when the export was trained so, ``restrict_answers``) for its action at every
non-terminal cell of each map, then scores that table exactly by dynamic programming over the slips
(``rockroll.envs.frozenlake.exact.policy_success``). Played episodes measure the same number with
a standard error of about 2.2 points on 500 maps; this has none, so two checkpoints can be compared
on the same maps. Next to it: the value-iteration optimum and the re-planning no-slip expert on the
same maps, split by no-slip shortest-path length. A cell whose greedy answer is not a valid action
is counted (``invalid cells``) and scored as ``Left`` (the table needs an action there); the count
says how much that can matter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make ``bench.*`` importable
    sys.path.insert(0, str(ROOT))

import rockroll.trainer.evaluation.exact as exact  # noqa: E402
from bench.learning.frozenlake_refs import _seed_range  # noqa: E402
from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams  # noqa: E402
from rockroll.agentrl.engines.hf import HFEngine  # noqa: E402
from rockroll.agentrl.eval.config import EPISODE_FILE  # noqa: E402
from rockroll.agentrl.models.tiny import load_model_and_tokenizer  # noqa: E402
from rockroll.agentrl.rollout.answers import answer_trie  # noqa: E402
from rockroll.envs.frozenlake.exact import references  # noqa: E402


async def _greedy(engine: HFEngine, prompts: list[list[int]], max_new: int, restrict: bool) -> list[list[int]]:
    """Greedy answers; with ``restrict`` (the export's ``restrict_answers``) among FrozenLake's moves, as in training."""
    allowed = answer_trie(engine, "FrozenLake-v0", restrict=restrict)
    params = SamplingParams(max_new_tokens=max_new, temperature=0.0, allowed=allowed)
    results = await asyncio.gather(
        *(engine.generate(GenerationRequest(p, params, str(i))) for i, p in enumerate(prompts))
    )
    await engine.close()
    return [r.token_ids for r in results]


def cell_prompts(model_dir: Path, tok: Any, seeds: list[int], size: int) -> tuple[list, list, list, int, bool]:
    """The prompt the model sees at every non-terminal cell of each seed's map, with the settings
    recorded beside the export: ``(maps, where, prompts, max_new_tokens, restrict_answers)``,
    ``where[i] = (map, row, col)`` (:func:`rockroll.trainer.evaluation.exact.cell_prompts`)."""
    settings = json.loads((model_dir / EPISODE_FILE).read_text()) if (model_dir / EPISODE_FILE).exists() else {}
    if settings.get("history", "last_k") != "last_k" or settings.get("history_k", 0) != 0:
        raise SystemExit(f"{model_dir}: the policy must see the current grid alone (rollout.episode.history_k: 0)")
    fmt = settings.get("observation_format", "cells")
    max_new = int(settings.get("max_tokens_per_turn", 6))
    kwargs = {"is_slippery": True, "size": size}
    system = exact.env_system_prompt("FrozenLake-v0", kwargs) if settings.get("system_prompt", "none") == "env" else ""
    cells = [exact.map_cells("FrozenLake-v0", kwargs, seed) for seed in seeds]
    where, prompts = exact.cell_prompts(tok, system, [c for _, c in cells], fmt, max_new)
    return [g for g, _ in cells], where, prompts, max_new, bool(settings.get("restrict_answers", False))


def exact_greedy(model_dir: Path, seeds: list[int], steps: int, size: int) -> dict[str, Any]:
    """Per seed: the exact success of the model's greedy cell policy, and the invalid cells
    (:func:`rockroll.trainer.evaluation.exact.table_success`)."""
    model, tok = load_model_and_tokenizer(model_dir)
    maps, where, prompts, max_new, restrict = cell_prompts(model_dir, tok, seeds, size)
    engine = HFEngine(model=model, tokenizer=tok, max_batch_size=256, seed=0)
    answers = asyncio.run(_greedy(engine, prompts, max_new, restrict))
    texts = [tok.decode(ids, skip_special_tokens=True) for ids in answers]
    success, invalid = exact.table_success(maps, where, texts, steps)
    return {"success": success, "invalid_cells": invalid, "cells": len(prompts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, action="append", required=True, help="an exported model directory")
    parser.add_argument("--seeds", type=_seed_range, default=range(1_000_000, 1_000_500), help="A:B held-out maps")
    parser.add_argument("--steps", type=int, default=20, help="step limit (FrozenLake-v0: 20)")
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    seeds = list(args.seeds)
    refs = references(seeds, size=args.size, steps=args.steps)
    cols: dict[str, list[float]] = {"optimum (VI)": refs["optimal"], "re-plan expert": refs["expert"]}
    out: dict[str, Any] = {"seeds": [seeds[0], seeds[-1] + 1], "models": {}}
    for m in args.model:
        res = exact_greedy(m, seeds, args.steps, args.size)
        cols[str(m)] = res["success"]
        out["models"][str(m)] = res
        print(f"{m}: exact greedy success {100 * sum(res['success']) / len(seeds):.1f}% "
              f"({sum(res['invalid_cells'])} invalid of {res['cells']} cells)")  # fmt: skip
    lengths = sorted(set(refs["path_len"]))
    names = list(cols)
    print("\n| length | maps | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for k in ["all", *lengths]:
        idx = [i for i, n in enumerate(refs["path_len"]) if k == "all" or n == k]
        cells = " | ".join(f"{100 * sum(cols[n][i] for i in idx) / len(idx):.1f}%" for n in names)
        print(f"| {k} | {len(idx)} | {cells} |")
    if args.json:
        out["references"] = {k: refs[k] for k in ("optimal", "expert", "path_len")}
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
