"""Adaptive test-run timeouts (RollPacker's rule) against a fixed limit, on SWE-v0's hidden-test runs.

    .venv/bin/python bench/rollout/adaptive_timeouts.py [--tasks 3] [--t-max 8] [--json bench/results/adaptive_timeouts.json]

A workload of submissions per task is replayed through the real env (``SWEEnv``, a process sandbox
by default): each submission is one episode (reset, the answer's edits, submit), of one of four kinds:

* ``correct``: the task's reference fix (the expert's answer), a test run of natural length;
* ``wrong``: no edit (the bug stays), a fast failing run;
* ``slow_wrong``: the buggy module sleeping an hour at import, a run that only a timeout ends;
* ``slow_correct``: the fix sleeping ``--slow-correct-s`` at import: correct, but slower than the
  other correct answers (the risk of the rule: it may be cut off).

Per task the kinds come in a shuffled order (``--seed``); tasks are interleaved. Two modes replay
the same submissions, each in its own sandbox, at the same time: ``fixed`` gives every run
``--t-max``; ``adaptive`` asks :class:`~rockroll.agentrl.rewards.adaptive_timeout.AdaptiveTimeouts` as the env
manager does (``reset_options``: the per-task table, sent as the reset option ``test_timeouts``;
``episode_ended`` with the reset and submit info). Reported per mode: the seconds spent in
test runs, the correct answers scored, the runs that timed out, the cut-offs (timed out under a
limit below ``--t-max``) and the correct answers cut off, which the ``fixed`` run of the same
submission tells (resolved under ``--t-max``); then the seconds saved, measured and as
:class:`AdaptiveTimeouts` estimates them.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rockroll.agentrl.rewards.adaptive_timeout import AdaptiveTimeouts
from rockroll.envs.swe import SWEEnv, generated_tasks
from rockroll.envs.swe.env import reference_actions

KINDS = ("correct", "wrong", "slow_wrong", "slow_correct")
ENV = "SWE-v0"


@dataclass(frozen=True)
class Submission:
    """One episode of the workload: ``kind`` of answer to task ``task_id`` (seed ``seed`` picks it)."""

    task_id: str
    seed: int
    kind: str


def workload(task_ids: list[str], counts: dict[str, int], seed: int = 0) -> list[Submission]:
    """``counts[kind]`` submissions of each kind per task, shuffled per task, tasks interleaved."""
    rng = np.random.default_rng(seed)
    per_task = []
    for i, task_id in enumerate(task_ids):
        kinds = [k for k in KINDS for _ in range(counts.get(k, 0))]
        per_task.append([Submission(task_id, i, str(k)) for k in rng.permutation(kinds)])
    return [sub for round_ in zip(*per_task, strict=True) for sub in round_]


def _answers(env: SWEEnv, kind: str, slow_correct_s: float) -> list[str]:
    """The edits of a ``kind`` answer to the env's current task, then submit."""
    task = env.task
    assert task is not None
    if kind == "wrong":
        return ["submit"]
    if kind == "correct":
        return reference_actions(task) + ["submit"]
    sleep_s = 3600.0 if kind == "slow_wrong" else slow_correct_s
    files = task.reference_files if kind == "slow_correct" else {p: task.files[p] for p in task.reference_files}
    edits = [f"edit: {p}\nimport time\ntime.sleep({sleep_s})\n{content}" for p, content in sorted(files.items())]
    return edits + ["submit"]


def replay(
    subs: list[Submission],
    t_max_s: float,
    timeouts: AdaptiveTimeouts | None = None,
    *,
    backend: str = "process",
    slow_correct_s: float = 1.5,
) -> list[dict[str, Any]]:
    """Play ``subs`` in one env: each run's limit, wall time, and outcome (``timeouts`` None: fixed ``t_max_s``)."""
    env = SWEEnv(backend=backend)
    rows = []
    try:
        for sub in subs:
            if timeouts is None:
                options = {"task_id": sub.task_id, "test_timeout_s": t_max_s}
            else:  # the per-task table the env manager sends (tasks without an entry: t_max); the env picks
                table = {t: t_max_s for t in {x.task_id for x in subs}} | timeouts.reset_options(ENV)["test_timeouts"]
                options = {"task_id": sub.task_id, "test_timeouts": table}
            _, reset_info = env.reset(seed=sub.seed, options=options)
            for answer in _answers(env, sub.kind, slow_correct_s):
                _, reward, terminated, _, info = env.step(f"<answer>{answer}</answer>")
            assert terminated, "the last answer submits"
            limit = min(info["test_timeout_s"], t_max_s)
            if timeouts is not None:
                timeouts.episode_ended(ENV, sub.seed, reset_info, info)
            rows.append({**asdict(sub), "limit_s": limit, "run_s": info["test_run_s"], "reward": reward,
                         "resolved": bool(info["resolved"]), "timed_out": bool(info["tests_timed_out"])})  # fmt: skip
    finally:
        env.close()
    return rows


def summarize(fixed: list[dict[str, Any]], adaptive: list[dict[str, Any]], t_max_s: float) -> dict[str, Any]:
    """Per mode: test-run seconds, correct scored, timeouts, cut-offs, correct answers cut off; the saving."""
    modes: dict[str, Any] = {}
    for name, rows in (("fixed", fixed), ("adaptive", adaptive)):
        cut = [i for i, r in enumerate(rows) if r["timed_out"] and r["limit_s"] < t_max_s]
        modes[name] = {
            "runs": len(rows),
            "test_run_s": round(sum(r["run_s"] for r in rows), 3),
            "correct_scored": sum(r["resolved"] for r in rows),
            "timed_out": sum(r["timed_out"] for r in rows),
            "cut_off": len(cut),
            "correct_cut_off": sum(fixed[i]["resolved"] for i in cut),  # the truth: resolved under t_max
            "mean_limit_s": round(float(np.mean([r["limit_s"] for r in rows])), 3),
        }
    saved = modes["fixed"]["test_run_s"] - modes["adaptive"]["test_run_s"]
    return {
        "modes": modes,
        "saved_s": round(saved, 3),
        "saved_pct": round(100 * saved / modes["fixed"]["test_run_s"], 1) if modes["fixed"]["test_run_s"] else 0.0,
    }


def compare(
    subs: list[Submission],
    *,
    t_min_s: float,
    lam: float,
    t_max_s: float,
    backend: str = "process",
    slow_correct_s: float = 1.5,
) -> dict[str, Any]:
    """Replay ``subs`` with the fixed limit and with the adaptive rule (at the same time, one sandbox each)."""
    timeouts = AdaptiveTimeouts(t_min_s, lam, t_max_s)
    kw = {"backend": backend, "slow_correct_s": slow_correct_s}
    with cf.ThreadPoolExecutor(2) as pool:
        fixed = pool.submit(replay, subs, t_max_s, None, **kw)
        adaptive = pool.submit(replay, subs, t_max_s, timeouts, **kw)
        fixed_rows, adaptive_rows = fixed.result(), adaptive.result()
    out = summarize(fixed_rows, adaptive_rows, t_max_s)
    out["estimated_saved_s"] = round(timeouts.snapshot()["adaptive_saved_s"], 3)
    out["runs"] = {"fixed": fixed_rows, "adaptive": adaptive_rows}
    return out


def render(result: dict[str, Any]) -> str:
    """A Markdown table of the two modes and the saving."""
    cols = [("test-run s", "test_run_s"), ("runs", "runs"), ("mean limit s", "mean_limit_s"),
            ("correct scored", "correct_scored"), ("timed out", "timed_out"), ("cut off", "cut_off"),
            ("correct cut off", "correct_cut_off")]  # fmt: skip
    lines = ["| mode | " + " | ".join(c for c, _ in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, m in result["modes"].items():
        lines.append(f"| {name} | " + " | ".join(str(m[k]) for _, k in cols) + " |")
    lines.append(
        f"\nsaved: {result['saved_s']:.1f} s of test runs ({result['saved_pct']:.1f}%); "
        f"AdaptiveTimeouts' estimate (t_max - T per cut-off): {result['estimated_saved_s']:.1f} s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=3, help="tasks (spread over the generated set)")
    for kind, n in zip(KINDS, (3, 1, 2, 1), strict=True):
        p.add_argument(f"--{kind.replace('_', '-')}", type=int, default=n, help=f"{kind} submissions per task")
    p.add_argument("--t-min", type=float, default=1.0, help="t_min_s of the rule")
    p.add_argument("--lam", type=float, default=3.0, help="lam of the rule")
    p.add_argument("--t-max", type=float, default=8.0, help="the fixed limit (t_max_s)")
    p.add_argument("--slow-correct-s", type=float, default=1.5, help="import-time sleep of a slow correct answer")
    p.add_argument("--backend", default="process", help="SWE-v0 backend: process, docker, auto, local")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    tasks = generated_tasks()
    ids = [tasks[i].task_id for i in np.linspace(0, len(tasks) - 1, args.tasks).astype(int)]
    counts = {k: getattr(args, k) for k in KINDS}
    started = time.monotonic()
    result = compare(
        workload(ids, counts, args.seed), t_min_s=args.t_min, lam=args.lam, t_max_s=args.t_max,
        backend=args.backend, slow_correct_s=args.slow_correct_s,
    )  # fmt: skip
    result["wall_s"] = round(time.monotonic() - started, 1)
    print(render(result))
    print(f"(bench wall time {result['wall_s']} s, {len(ids)} tasks: {', '.join(ids)})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), **result}, f, indent=1)
    return result


if __name__ == "__main__":
    main()
