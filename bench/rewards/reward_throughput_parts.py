"""The measurements of ``bench/rewards/reward_throughput.py`` (see its docstring): cases, timed batches, the judge's
server and the RLVR steps. Every function here runs the project's own code: the reward router and its
pool, the ``code`` reward's process sandboxes, ``rockroll serve-model``, and the trainer's RLVR rollout."""

from __future__ import annotations

import math
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rockroll.agentrl.rewards import RewardOutcome, RewardRouter, Sample, generate
from rockroll.agentrl.rewards.pool import default_reward_workers

ROCKROLL = str(Path(sys.executable).with_name("rockroll"))


# ------------------------------------------------------------------ outcomes -> a row
def error_kinds(outcomes: Sequence[RewardOutcome]) -> dict[str, int]:
    """Infra failures by kind: the exception named in the router's error text (``reward: Name: ...``)."""
    kinds: Counter[str] = Counter()
    for o in outcomes:
        if o.infra:
            found = re.search(r"(\w+(?:Error|Exception|Failure))", o.error)
            kinds["timeout" if "longer than" in o.error else found.group(1) if found else "other"] += 1
    return dict(kinds)


def outcome_row(part: str, setting: str, outcomes: Sequence[RewardOutcome], wall_s: float, **extra: Any) -> dict:
    """One table row: rewards/s over the batch's wall time, mean call latency, scored vs infra, mean score."""
    scored = [o.score for o in outcomes if not o.infra]
    return {
        "part": part,
        "setting": setting,
        "n": len(outcomes),
        "wall_s": wall_s,
        "per_s": len(outcomes) / wall_s if wall_s > 0 else float("nan"),
        "latency_s": sum(o.latency_s for o in outcomes) / max(len(outcomes), 1),
        "scored": len(scored),
        "infra": len(outcomes) - len(scored),
        "mean": sum(scored) / len(scored) if scored else float("nan"),
        "infra_kinds": error_kinds(outcomes),
        **extra,
    }


def timed_batch(router: RewardRouter, samples: list[Sample], responses: list[str]) -> tuple[list[RewardOutcome], float]:
    started = time.perf_counter()
    outcomes = router.score_batch_sync(samples, responses)
    return outcomes, time.perf_counter() - started


# ------------------------------------------------------------------ 1. math
def _latex_case(kind: int, rng: random.Random) -> tuple[str, str, bool]:
    """(gold, response, right?) of a fraction or radical answer, in the forms math-verify must equate."""
    q = rng.choice([2, 3, 4, 5, 6, 8, 10, 12])
    p = rng.choice([x for x in range(1, 3 * q) if math.gcd(x, q) == 1 and x % q])
    frac, k = f"\\frac{{{p}}}{{{q}}}", rng.randint(2, 9)
    if kind == 3:
        return frac, f"Hence the answer is $\\boxed{{{frac}}}$.", True
    if kind == 4:  # a decimal where it is exact, else a plain slash
        return frac, (f"\\boxed{{{p / q:g}}}" if q in (2, 4, 5, 8, 10) else f"\\boxed{{{p}/{q}}}"), True
    if kind == 5:  # not reduced, \dfrac
        return frac, f"So $\\boxed{{\\dfrac{{{2 * p}}}{{{2 * q}}}}}$", True
    if kind == 6:
        return frac, f"\\boxed{{\\frac{{{p + 1}}}{{{q}}}}}", False
    right = rng.random() < 0.5  # k*sqrt(2) = sqrt(2k^2), not sqrt(2k)
    return f"{k}\\sqrt{{2}}", f"\\boxed{{\\sqrt{{{2 * k * k if right else 2 * k}}}}}", right


def math_cases(n: int, seed: int = 0) -> tuple[list[Sample], list[str], list[bool]]:
    """``n`` math samples: 3/8 generated integer sums (right boxed, wrong boxed, right unboxed), 5/8 LaTeX
    fractions and radicals (right in four forms, wrong in two); with whether each response is right."""
    rng = random.Random(seed)
    samples, responses, right = [], [], []
    for i, s in enumerate(generate("arithmetic", n, seed=seed)):
        kind = i % 8
        if kind < 3:
            gold = int(s.metadata["answer"])
            text = [f"So the result is \\boxed{{{gold}}}.", f"It is \\boxed{{{gold + 1}}}.", f"The answer is {gold}."]
            samples.append(s)
            responses.append(text[kind])
            right.append(kind != 1)
            continue
        gold_text, response, ok = _latex_case(kind, rng)
        samples.append(Sample(f"Simplify the value of task {i}.", "math", {"answer": gold_text}))
        responses.append(response)
        right.append(ok)
    return samples, responses, right


def bench_math(n: int, workers: int | None, timeout_s: float) -> dict:
    """Math rewards/s through a router and its pool (``workers`` threads; None: the pool's default)."""
    samples, responses, right = math_cases(n)
    cfg = {"routes": {"math": {"reward": "math"}}, "max_workers": workers, "timeout_s": timeout_s}
    with RewardRouter(cfg) as router:
        router.score_batch_sync(samples[:16], responses[:16])  # warm-up: sympy and the LaTeX parser import
        outcomes, wall = timed_batch(router, samples, responses)
    wrong = [
        (o, s)
        for o, s, r in zip(outcomes, samples, right, strict=True)
        if not o.infra and o.details.get("correct") != r
    ]
    threads = workers or default_reward_workers()
    examples = [{"gold": s.metadata["answer"], **o.details} for o, s in wrong[:3]]
    return outcome_row("math", f"pool {threads} thr", outcomes, wall, misjudged=len(wrong), examples=examples)


# ------------------------------------------------------------------ 2. code
def code_cases(n: int, seed: int = 0) -> tuple[list[Sample], list[str], list[float]]:
    """``n`` generated function tasks: half answered with the reference (passes), a quarter with a wrong
    function (loads, fails every assert), a quarter with a syntax error; with the score each must get."""
    samples = generate("python_functions", n, seed=seed)
    responses, expected = [], []
    for i, s in enumerate(samples):
        name, arg = re.match(r"def (\w+)\((\w+)\)", s.metadata["reference"]).groups()  # type: ignore[union-attr]
        code = [
            s.metadata["reference"],
            s.metadata["reference"],
            f"def {name}({arg}):\n    return None\n",
            f"def {name}({arg}):\n    return {arg} +\n",
        ][i % 4]
        responses.append(f"Here it is:\n```python\n{code}```\n")
        expected.append(1.0 if i % 4 < 2 else 0.0)
    return samples, responses, expected


def bench_code(n: int, concurrency: int, runs_per_sandbox: int, timeout_s: float) -> dict:
    """Code rewards/s with ``concurrency`` pool threads over ``concurrency / runs_per_sandbox`` process sandboxes.
    Warm-up (one call per slot, so every sandbox starts) is timed apart: ``start_s``."""
    samples, responses, expected = code_cases(n)
    warm_s, warm_r, _ = code_cases(concurrency, seed=1)
    boxes = max(1, math.ceil(concurrency / runs_per_sandbox))
    options = {"sandboxes": boxes, "runs_per_sandbox": runs_per_sandbox}
    cfg = {
        "routes": {"code": {"reward": "code", "options": options}},
        "max_workers": concurrency,
        "timeout_s": timeout_s,
    }
    with RewardRouter(cfg) as router:
        _, start = timed_batch(router, warm_s, warm_r)
        outcomes, wall = timed_batch(router, samples, responses)
        counts = dict(router.rewards["code"].metric_counts())  # type: ignore[attr-defined]
    wrong = [o for o, e in zip(outcomes, expected, strict=True) if not o.infra and abs(o.score - e) > 1e-9]
    setting = f"{concurrency} in flight ({boxes} sb)"
    examples = [o.details for o in wrong[:3]]
    return outcome_row(
        "code", setting, outcomes, wall, misjudged=len(wrong), examples=examples, start_s=start, counts=counts
    )


# ------------------------------------------------------------------ 3. judge
def build_judge_model(out: Path) -> Path:
    """The tests' tiny judge (hidden 32, 1 layer, random weights, the env-text tokenizer)."""
    import torch

    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(1)
    shape = TinyModelConfig(
        hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64, episodes_per_env=3
    )
    return Path(build_tiny_model(out, shape))


@contextmanager
def serve_model(model_dir: Path, name: str, max_batch: int) -> Iterator[str]:
    """``rockroll serve-model DIR --port 0`` on 127.0.0.1; yields its ``.../v1`` URL; stopped on exit."""
    from rockroll.api.server.serve_proc import serve_model_proc

    args = ("--max-batch-size", str(max_batch), "--threads", "1")
    with serve_model_proc(model_dir, name, args) as (url, _proc):
        yield url + "/v1"


def bench_judge(url: str, n: int, concurrency: int, max_tokens: int, pattern: str | None, timeout_s: float) -> dict:
    """Judge rewards/s (async calls on the loop, ``concurrency`` in flight, no rate cap) against ``url``."""
    samples = [Sample(s.prompt, "judge", s.metadata) for s in generate("arithmetic", n + 4, seed=2)]
    responses = [f"\\boxed{{{int(s.metadata['answer']) + i % 2}}}" for i, s in enumerate(samples)]
    options: dict[str, Any] = {"base_url": url, "model": "judge", "max_tokens": max_tokens, "requests_per_s": 0,
                               "max_concurrency": concurrency, "timeout_s": timeout_s, "api_key_env": "RR_BENCH_NO_KEY"}  # fmt: skip
    if pattern:
        options["score_pattern"] = pattern
    with RewardRouter({"routes": {"judge": {"reward": "judge", "options": options}}, "timeout_s": timeout_s}) as r:
        r.score_batch_sync(samples[:4], responses[:4])  # warm-up: the server's first decode
        outcomes, wall = timed_batch(r, samples[4:], responses[4:])
    return outcome_row("judge", f"{concurrency} in flight, {max_tokens} tok", outcomes, wall)


# ------------------------------------------------------------------ 4. RLVR steps
def step_config(kind: str, root: Path, groups: int, workers: int | None, overlap: bool = True) -> Any:
    """``configs/rlvr_<kind>.yaml`` as shipped but: no warm start, every group trained on (no dynamic sampling,
    overlong answers kept: a random model neither stops nor scores), ``groups`` groups (0: the config's),
    ``workers`` pool threads (None: the config's), ``overlap``: rewards scored while the rest generate."""
    from rockroll.trainer.config_io import load_config

    overrides = [
        f"model.path={root / (kind + '-model')}", f"logging.run_dir={root / 'runs'}", "logging.tensorboard=false",
        "logging.progress=false", "sft.steps=0", "algo.dynamic_sampling=false", "rollout.rlvr.overlong=none",
        f"rollout.rlvr.overlap_chunks={4 if overlap else 1}",
    ]  # fmt: skip
    if groups:
        overrides.append(f"rollout.scheduler.num_env_groups={groups}")
    if workers:
        overrides.append(f"rollout.rlvr.rewards.max_workers={workers}")
    return load_config(Path(__file__).resolve().parents[2] / "configs" / f"rlvr_{kind}.yaml", overrides)


def _one_step(cfg: Any, rollout: Any, workers: Any, tok: Any, step: int, version: int) -> tuple[dict, int]:
    """One step as ``trainer/pipeline.py``'s loop runs it (rollout, update, weight sync), timed; the reward wait
    is the router's pool's own in-flight clock (``RewardPool.wall_s``) over the rollout."""
    from rockroll.trainer.learner.learn import learn

    pool = rollout.router.pool
    r0, t0 = pool.wall_s, time.perf_counter()
    trajs, metrics = rollout.next_batch(step)
    t1, r1 = time.perf_counter(), pool.wall_s
    _, weights = learn(cfg, workers, rollout, trajs, step, tok.pad_token_id)
    if weights is not None:
        version += 1
        rollout.update_weights(weights, version)
    t2 = time.perf_counter()
    tag = rollout.tags[0]
    rewards = metrics.get(f"reward/{tag}/count", 0.0)
    return {
        "step_s": t2 - t0, "rollout_s": t1 - t0, "reward_s": r1 - r0, "learn_s": t2 - t1, "rewards": rewards,
        "infra": metrics.get(f"reward/{tag}/infra_failures", 0.0), "trained": len(trajs),
    }, version  # fmt: skip


def bench_steps(
    kind: str, root: Path, steps: int, groups: int, workers: int | None, budget_s: float, overlap: bool = True
) -> dict:
    """``steps`` timed RLVR steps (after one untimed warm-up step) of a real tiny model; stops early past ``budget_s``."""
    import torch

    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.learner.workers import make_workers
    from rockroll.trainer.rollout.rlvr_model import ensure_task_model
    from rockroll.trainer.rollout.setup import make_rollout

    cfg = step_config(kind, root, groups, workers, overlap)
    torch.set_num_threads(cfg.torch_threads)
    ensure_task_model(cfg)
    model, tok = load_policy(cfg.model)
    rollout = make_rollout(cfg, model, tok, None)  # type: ignore[arg-type]  # rlvr reads no env source
    learners, per, version = None, [], 0
    try:
        learners = make_workers(model, cfg)
        started = time.monotonic()
        for step in range(steps + 1):
            if step > 1 and time.monotonic() - started > budget_s:
                break
            record, version = _one_step(cfg, rollout, learners, tok, step, version)
            if step:
                per.append(record)
    finally:
        if learners is not None:
            learners.close()
        rollout.close()
    total = {k: sum(p[k] for p in per) for k in per[0]} if per else {}
    threads = workers or default_reward_workers()
    return {
        "part": "step", "setting": f"{kind}, {'overlap' if overlap else 'no overlap'}, {threads} thr",
        "overlap": overlap, "steps": len(per), "per_step": per,
        **{f"mean_{k}": v / max(len(per), 1) for k, v in total.items()},
        "reward_share": total["reward_s"] / total["step_s"] if per else float("nan"),
        "in_step_per_s": total["rewards"] / total["reward_s"] if per and total["reward_s"] > 0 else float("nan"),
    }  # fmt: skip
