r"""Reward throughput: rewards/s of the RLVR reward registry (``rockroll.agentrl.rewards``) through the reward
router and its pool, and the share of an RLVR step spent waiting on rewards.

    .venv/bin/python bench/rewards/reward_throughput.py                  # full: ~2.5 min on 2 busy cores
    .venv/bin/python bench/rewards/reward_throughput.py --quick          # ~1 min: small sizes, same code paths
    .venv/bin/python bench/rewards/reward_throughput.py --skip-judge --skip-step --code-n 256 --concurrency 16,64

Writes ``bench/results/reward_throughput.json`` (``--quick``: ``reward_throughput_quick.json``; ``--json``
elsewhere). Every part uses the project's real code; sizes are flags (``--help``). Columns: ``start s``
(sandbox start-up, or judge model build + server start; timed apart from the batch), ``wall s`` and ``rewards/s`` of one batch
scored at once, ``lat s`` (mean seconds of a call, its wait for a pool thread included: the pool's
``timeout_s`` counts that wait too), ``scored``/``infra`` (infra: masked, never scored), ``mean`` score.

1. ``math``: ``--math-n`` samples through :class:`RewardRouter` (the RLVR rollout's router; its
   :class:`RewardPool` threads, ``--math-workers``: ``auto`` is the rollout's default, ``min(32, CPUs + 4)``).
   3/8 are generated integer tasks (``arithmetic``: right boxed, wrong boxed, right but unboxed), 5/8
   LaTeX answers (``\frac{p}{q}`` answered as ``\frac``, a decimal or ``p/q``, an unreduced ``\dfrac``, a
   wrong fraction; ``k\sqrt{2}`` answered as ``\sqrt{2k^2}`` or a wrong radical). ``misjudged``: responses
   whose ``correct`` differs from what was built (should be 0). math-verify holds the GIL: threads add little.
2. ``code``: ``--code-n`` generated function tasks (``python_functions``): half the reference solution
   (passes its 4 asserts), a quarter a wrong function, a quarter a syntax error, run by the ``code`` reward
   in process sandboxes (no Docker) at each ``--concurrency`` (pool threads = concurrency, sandboxes =
   concurrency / ``--runs-per-sandbox``). Sandbox start-up (one warm-up call per slot) is timed apart.
3. ``judge``: ``--judge-n`` requests of the ``judge`` reward (async, ``--judge-concurrency`` in flight, no
   rate cap) against a real ``rockroll serve-model`` of the tests' tiny random model on 127.0.0.1, with
   ``--judge-max-tokens``. A random model writes no ``SCORE: N``: most outcomes are infra failures
   (``JudgeParseError``); they are counted as such, never scored. The request rate is what is measured.
4. ``step``: ``--step-n`` RLVR steps (after one untimed warm-up) of ``configs/rlvr_arithmetic.yaml`` and
   ``configs/rlvr_code.yaml`` with a fresh tiny model, as ``trainer/pipeline.py`` runs a step (rollout, update,
   weight sync), without warm start, dynamic sampling or overlong filtering (a random model neither stops
   nor scores, so otherwise nothing would be trained on), ``--step-groups`` groups (0: the configs' 16 and 8),
   once with ``rollout.rlvr.overlap_chunks=1`` (the whole draw generated, then scored) and once with 4 (four
   batched calls of whole groups, each scored while the next generates). ``reward s``: the
   pool's own clock of time with a reward in flight (``RewardPool.wall_s``); ``waited s``: the reward seconds
   on the step's critical path (without overlap all of them; with it, the rollout's time beyond the serial
   run's generation time); ``waited %``: waited s / step s. A random model's answers are garbage, so math
   scores them faster here than part 1's well-formed answers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # keep the tables readable
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make ``bench.*`` importable
    sys.path.insert(0, str(ROOT))
import bench.rewards.reward_throughput_parts as parts  # noqa: E402

RESULTS = ROOT / "bench" / "results"
FULL = {"math_n": 2000, "code_n": 512, "judge_n": 256, "judge_max_tokens": 64, "step_n": 4, "step_groups": 0}
QUICK = {"math_n": 240, "code_n": 64, "judge_n": 48, "judge_max_tokens": 16, "step_n": 2, "step_groups": 4}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (under ~2 min); explicit flags still win")
    ap.add_argument("--math-n", type=int, help=f"math rewards timed (full {FULL['math_n']}, quick {QUICK['math_n']})")
    ap.add_argument("--math-workers", default="auto,1", help="pool threads of each math row; auto: the default")
    ap.add_argument("--code-n", type=int, help=f"code rewards timed per concurrency (full {FULL['code_n']})")
    ap.add_argument("--concurrency", default="16,64", help="code rewards in flight, one row each")
    ap.add_argument("--runs-per-sandbox", type=int, default=4, help="test runs one sandbox hosts at once")
    ap.add_argument("--judge-n", type=int, help=f"judge requests timed (full {FULL['judge_n']})")
    ap.add_argument("--judge-concurrency", type=int, default=16, help="judge requests in flight")
    ap.add_argument("--judge-max-tokens", type=int, help="tokens the judge may write (full 64, quick 16)")
    ap.add_argument("--judge-pattern", default="", help="score regex (default: the reward's 'SCORE: N')")
    ap.add_argument("--step-n", type=int, help="timed RLVR steps per config and pool (full 4, quick 2)")
    ap.add_argument("--step-groups", type=int, help="groups per step (0: the shipped configs'; quick 4)")
    ap.add_argument("--step-configs", default="arithmetic,code", help="configs/rlvr_<name>.yaml to step")
    ap.add_argument("--step-budget-s", type=float, default=120.0, help="no new step past this, per config and pool")
    ap.add_argument("--timeout-s", type=float, default=60.0, help="reward pool timeout of one call")
    ap.add_argument("--skip-math", action="store_true")
    ap.add_argument("--skip-code", action="store_true")
    ap.add_argument("--skip-judge", action="store_true")
    ap.add_argument("--skip-step", action="store_true")
    ap.add_argument("--json", default="", help="where the results go (default under bench/results/)")
    args = ap.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if not args.json:
        args.json = str(RESULTS / ("reward_throughput_quick.json" if args.quick else "reward_throughput.json"))
    return args


def _ints(text: str) -> list[int | None]:
    return [None if x.strip() == "auto" else int(x) for x in text.split(",") if x.strip()]


def run_rewards(args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    """Parts 1-3: one row per setting, printed as it finishes."""
    rows: list[dict[str, Any]] = []
    if not args.skip_math:
        for workers in _ints(args.math_workers):
            rows.append(parts.bench_math(args.math_n, workers, args.timeout_s))
            print_reward_rows(rows[-1:], header=len(rows) == 1)
    if not args.skip_code:
        for c in _ints(args.concurrency):
            rows.append(parts.bench_code(args.code_n, c or 16, args.runs_per_sandbox, args.timeout_s))
            print_reward_rows(rows[-1:], header=len(rows) == 1)
    if not args.skip_judge:
        t0 = time.perf_counter()
        model = parts.build_judge_model(root / "judge-model")
        with parts.serve_model(model, "judge", max_batch=max(args.judge_concurrency, 1)) as url:
            ready = time.perf_counter() - t0
            row = parts.bench_judge(url, args.judge_n, args.judge_concurrency, args.judge_max_tokens,
                                    args.judge_pattern or None, args.timeout_s)  # fmt: skip
        rows.append({**row, "start_s": ready})
        print_reward_rows(rows[-1:], header=len(rows) == 1)
    return rows


def run_steps(args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    """Part 4: per config, rewards after the whole draw (no overlap), then scored as each answer is generated
    (overlap, the default); both see the same rows and seeded answers, with the pool as configured."""
    rows: list[dict[str, Any]] = []
    for kind in [k.strip() for k in args.step_configs.split(",") if k.strip()]:
        for overlap in (False, True):
            row = parts.bench_steps(kind, root, args.step_n, args.step_groups, None, args.step_budget_s, overlap)
            rows.append(exposed(row, rows[-1] if overlap else None))
            print_step_rows(rows[-1:], header=len(rows) == 1)
    return rows


def exposed(row: dict[str, Any], serial: dict[str, Any] | None) -> dict[str, Any]:
    """The reward seconds on a step's critical path: all of them without overlap; with it, the rollout's time
    beyond the serial run's generation (its rollout minus its rewards), at least 0."""
    if not row["steps"]:
        return row
    if serial is None or not serial["steps"]:
        wait = row["mean_reward_s"]
    else:
        wait = max(0.0, row["mean_rollout_s"] - (serial["mean_rollout_s"] - serial["mean_reward_s"]))
    return {**row, "mean_exposed_s": wait, "exposed_share": wait / row["mean_step_s"]}


def _f(x: float, spec: str) -> str:
    return format(x, spec) if x == x else "-"  # NaN -> "-"


def print_reward_rows(rows: list[dict[str, Any]], *, header: bool) -> None:
    if header:
        print(
            f"{'part':6} {'setting':24} {'n':>5} {'start s':>8} {'wall s':>7} {'rewards/s':>10} {'lat s':>7} "
            f"{'scored':>6} {'infra':>5} {'mean':>5} {'misjudged':>9}  infra kinds"
        )
    for r in rows:
        start = _f(r.get("start_s", float("nan")), ".2f")
        kinds = ", ".join(f"{k} {v}" for k, v in r["infra_kinds"].items()) or "-"
        print(
            f"{r['part']:6} {r['setting']:24} {r['n']:>5} {start:>8} {r['wall_s']:>7.2f} {r['per_s']:>10.1f} "
            f"{r['latency_s']:>7.3f} {r['scored']:>6} {r['infra']:>5} {_f(r['mean'], '.2f'):>5} "
            f"{str(r.get('misjudged', '-')):>9}  {kinds}",
            flush=True,
        )


def print_step_rows(rows: list[dict[str, Any]], *, header: bool) -> None:
    if header:
        print(
            f"\n{'step':32} {'steps':>5} {'rewards':>7} {'step s':>7} {'rollout s':>9} {'reward s':>8} "
            f"{'waited s':>8} {'learn s':>7} {'waited %':>8} {'infra':>5}"
        )
    for r in rows:
        if not r["steps"]:
            print(f"{r['setting']:32} {0:>5}  (no step within the budget)")
            continue
        print(
            f"{r['setting']:32} {r['steps']:>5} {r['mean_rewards']:>7.0f} {r['mean_step_s']:>7.2f} "
            f"{r['mean_rollout_s']:>9.2f} {r['mean_reward_s']:>8.2f} {r['mean_exposed_s']:>8.2f} "
            f"{r['mean_learn_s']:>7.2f} {100 * r['exposed_share']:>7.1f}% {r['mean_infra']:>5.0f}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout is disabled": the pool's timeout bounds it
    started = time.perf_counter()
    load = os.getloadavg()
    rows: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rr-reward-bench-") as tmp:
        root = Path(tmp)
        try:
            rows = run_rewards(args, root)
            if not args.skip_step:
                steps = run_steps(args, root)
        finally:
            out = {
                "args": vars(args), "cpus": os.cpu_count(), "loadavg_at_start": load, "python": platform.python_version(),
                "wall_s": time.perf_counter() - started, "rewards": rows, "steps": steps,
            }  # fmt: skip
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    print(f"\ntotal {time.perf_counter() - started:.0f} s (load average at start {load[0]:.2f}); wrote {args.json}")


if __name__ == "__main__":
    main()
