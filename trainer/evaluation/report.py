"""The held-out report of a run: success split by difficulty, before the warm start, after it and
after RL, next to exact references where the env has them.

For slippery FrozenLake the references are computed on the very maps evaluated
(:mod:`rockroll.envs.frozenlake.exact`): the value-iteration optimum (dynamic programming over the
slips, no sampling) and the best blind whole-plan answer (a beam search over fixed action
sequences, a lower bound), plus the re-planning no-slip expert the warm start imitates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import rockroll.envhub as envhub
from rockroll.envs.frozenlake.exact import references

__all__ = ["REFERENCES", "env_references", "run_report", "success_table"]

PHASES = (("eval_pre_sft", "before warm start"), ("eval_start", "after warm start"), ("eval_end", "after RL"))


def _frozenlake(env_kwargs: dict[str, Any], seeds: list[int], steps: int) -> dict[str, Any] | None:
    if not env_kwargs.get("is_slippery", True):
        return None
    size, p = int(env_kwargs.get("size", 4)), float(env_kwargs.get("p", 0.8))
    refs = references(seeds, size=size, p=p, steps=steps)
    names = {"optimal": "optimum (VI)", "best_blind": "best blind plan (beam)", "expert": "re-planning expert"}
    table = {"all": {names[k]: refs["mean"][k] for k in names}}
    for length, row in refs["by_path_len"].items():
        table[int(length)] = {names[k]: row[k] for k in names}
    return table


#: env id -> fn(env_kwargs, seeds, steps) -> {difficulty | "all": {reference name: success}} (None: none apply)
REFERENCES: dict[str, Callable[[dict[str, Any], list[int], int], dict[Any, dict[str, float]] | None]] = {
    "FrozenLake-v0": _frozenlake,
}


def env_references(env_id: str, env_kwargs: dict[str, Any], seeds: list[int], max_turns: int) -> dict | None:
    """Exact references of ``env_id`` on ``seeds`` (None when the env has none)."""
    fn = REFERENCES.get(env_id)
    if fn is None or not seeds:  # no held-out maps (rollout.eval_episodes=0): nothing to compare
        return None
    limit = envhub.spec(env_id).max_steps
    steps = min(max_turns, limit) if limit else max_turns
    return fn(dict(env_kwargs), seeds, steps)


def success_table(summary: dict[str, Any], tag: str, refs: dict | None = None, maps: int = 0) -> str:
    """A Markdown table: rows by difficulty (and all), columns by phase, then references.

    ``maps``: the held-out maps of the "all" row when the env reports no difficulty (no ``n_len<k>``).
    """
    cols = [(key, title) for key, title in PHASES if isinstance(summary.get(key), dict)]
    ref_names = list(next(iter(refs.values())).keys()) if refs else []
    end = summary.get("eval_end") or {}
    lengths = sorted(int(k.rsplit("len", 1)[1]) for k in end if k.startswith(f"eval/{tag}/success_len"))
    kinds = sorted(k.split("success_cat_", 1)[1] for k in end if k.startswith(f"eval/{tag}/success_cat_"))
    header = ["difficulty", "maps"] + [t for _, t in cols] + ref_names
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows: list[tuple[Any, str]] = [("all", "")] + [(k, f"len{k}") for k in lengths] + [(k, f"cat_{k}") for k in kinds]
    for row, split in rows:
        suffix = "success" if row == "all" else f"success_{split}"
        n = (
            end.get(f"eval/{tag}/n_{split}")
            if row != "all"
            else sum(end.get(f"eval/{tag}/n_len{k}", 0) for k in lengths) or maps
        )
        cells = [str(row), str(int(n or 0))]
        for key, _ in cols:
            metrics = summary[key]
            prefix = next((k.split("/")[0] for k in metrics if k.endswith(f"/{tag}/success")), "eval")
            value = metrics.get(f"{prefix}/{tag}/{suffix}")
            cells.append("" if value is None else f"{value:.1%}")
        for name in ref_names:
            value = (refs or {}).get(row, {}).get(name)
            cells.append("" if value is None else f"{value:.1%}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_report(summary: dict[str, Any], envs: list[Any], refs: dict[str, dict | None], maps: int = 0) -> str:
    """The report of a run: one env's table, or with several envs (``rollout.envs``) one table per env tag
    (its own held-out maps and references) after a line of the mean success per phase."""
    if len(envs) == 1:
        return success_table(summary, envs[0].tag, refs.get(envs[0].tag), maps)
    phases = []
    for key, title in PHASES:
        metrics = summary.get(key)
        if isinstance(metrics, dict):
            prefix = next((k.split("/")[0] for k in metrics if k.endswith(f"/{envs[0].tag}/success")), "eval")
            values = [metrics.get(f"{prefix}/{e.tag}/success") for e in envs]
            if all(v is not None for v in values):
                phases.append(f"{title} {sum(values) / len(values):.1%}")
    parts = [f"Mean success over {len(envs)} envs: " + (", ".join(phases) or "n/a") + "."]
    for e in envs:
        parts.append(
            f"### {e.tag} ({e.env_id}, ratio {e.ratio:g})\n\n" + success_table(summary, e.tag, refs.get(e.tag), maps)
        )
    return "\n\n".join(parts)
