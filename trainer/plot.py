"""``rockroll plot RUN``: PNG curves of a run's ``metrics.jsonl`` (one figure per namespace)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

__all__ = ["plot_run"]


def plot_run(run: str | Path, out_dir: str | Path | None = None, keys: list[str] | None = None) -> list[Path]:
    """Write ``<namespace>.png`` files (env, eval, actor, critic, rollout, time, system) for a run; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rockroll.trainer.metrics import read_metrics

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
    return paths
