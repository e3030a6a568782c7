"""``rockroll plot RUN``: PNG curves of a run's ``metrics.jsonl`` (one figure per namespace)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

__all__ = ["plot_run", "step_time_split", "STAGES"]


def plot_run(
    run: str | Path,
    out_dir: str | Path | None = None,
    keys: list[str] | None = None,
    on_file: Callable[[Path], None] | None = None,
) -> list[Path]:
    """Write ``<namespace>.png`` files (env, eval, actor, critic, rollout, time, system) for a run; return their
    paths. ``on_file(path)`` is called as each one is written (a progress display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rockroll.trainer.run.metrics import read_metrics

    records = [r for r in read_metrics(run) if r.get("step", -1) >= 0]
    if not records:
        raise ValueError(f"{run} has no step records to plot")
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for rec in records:
        for k, v in rec.items():
            if k == "step" or not isinstance(v, (int, float)) or (keys and k not in keys):
                continue
            series[k].append((rec["step"], float(v)))
    by_ns: dict[str, list[str]] = defaultdict(list)
    for k in sorted(series):
        by_ns[k.split("/")[0]].append(k)
    out = Path(out_dir) if out_dir else Path(run) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ns, names in by_ns.items():
        cols = min(3, len(names))
        rows = -(-len(names) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.0 * rows), squeeze=False)
        for ax, name in zip(axes.flat, names, strict=False):
            xs, ys = zip(*series[name], strict=True)
            ax.plot(xs, ys, marker="." if len(xs) < 40 else None)
            ax.set_title(name, fontsize=9)
            ax.set_xlabel("step", fontsize=8)
            ax.grid(alpha=0.3)
        for ax in list(axes.flat)[len(names) :]:
            ax.axis("off")
        fig.tight_layout()
        path = out / f"{ns}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        paths.append(path)
        if on_file is not None:
            on_file(path)
    if not keys and any("time/step" in r for r in records):
        paths.append(_step_time_bars(records, out, plt))
    return paths


STAGES = ("generation", "env", "reward", "logprobs", "train", "sync")


def step_time_split(rec: dict[str, float]) -> dict[str, float]:
    """Where one step's seconds went: the rollout wait split into reward by ``time/reward_share`` (none
    when unknown), the rest into generation and env by ``time/generation_share`` (all generation when
    unknown), then logprobs, update, weight sync."""
    rollout = float(rec.get("time/rollout", 0.0))
    reward = rollout * float(rec.get("time/reward_share", 0.0))
    share = float(rec.get("time/generation_share", 1.0))
    return {
        "generation": (rollout - reward) * share,
        "env": (rollout - reward) * (1.0 - share),
        "reward": reward,
        "logprobs": float(rec.get("time/logprobs", 0.0)),
        "train": float(rec.get("time/train", 0.0)),
        "sync": float(rec.get("time/sync", 0.0)),
    }


def _step_time_bars(records: list[dict], out: Path, plt: object) -> Path:
    """``step_time.png``: one stacked bar per step (generation, env, reward, logprobs, update, weight sync)."""
    rows = [r for r in records if "time/step" in r]
    steps = [r["step"] for r in rows]
    splits = [step_time_split(r) for r in rows]
    fig, ax = plt.subplots(figsize=(8, 3.5))  # type: ignore[attr-defined]
    bottom = [0.0] * len(rows)
    for stage in STAGES:
        heights = [s[stage] for s in splits]
        ax.bar(steps, heights, bottom=bottom, width=1.0, label=stage)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set_xlabel("step")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8, ncol=len(STAGES))
    fig.tight_layout()
    path = out / "step_time.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)  # type: ignore[attr-defined]
    return path
