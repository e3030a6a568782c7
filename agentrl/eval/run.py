"""Evaluation: a model (any engine) plays N episodes of each env or tag; a JSON + Markdown report.

:func:`run_eval` is what ``rockroll eval CONFIG`` and the jobs API call (:func:`run_eval_job` adapts
it to a job context). Episodes run concurrently (``concurrency``) through the same env managers as
training rollout, so infra failures are retried or masked the same way: masked episodes are counted
in the report and never scored. With ``source.kind: sandbox`` a local SandboxManager with a warm
pool hosts the sessions; sandboxes are reused across episodes (several sessions per sandbox). Source
kinds are a registry (:func:`rockroll.agentrl.sources.kinds.open_source`, re-exported here); ``remote``
comes from :mod:`rockroll.agentrl.sources.remote`.

Report per env id and per registry tag: episodes, masked, success rate, valid-action rate (valid
actions / actions), mean turns, mean final reward, agent failures (context exhausted). The JSON also
holds one record per episode (env, seed, success, turns, reward, masked, ...) in (env, seed) order,
and a ``summary`` (count, masked, successes, success rate over the scored episodes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import rockroll.envhub as envhub
from rockroll.agentrl.engines.base import LLMEngine
from rockroll.agentrl.eval.config import EngineConfig, EvalConfig, from_dict, load_eval_config
from rockroll.agentrl.rollout.env_manager import EpisodeSpec
from rockroll.agentrl.rollout.lockstep import make_env_manager
from rockroll.agentrl.sources.kinds import CallableSource, EnvSource, open_source
from rockroll.agentrl.tools.metrics import TOOL_COUNTS as TOOL_COUNT_KEYS
from rockroll.agentrl.tools.metrics import TOOL_METRICS, tool_metrics
from rockroll.agentrl.trajectory import FailureTag, Trajectory
from rockroll.envhub import UnknownEnvError

__all__ = [
    "EvalReport",
    "run_eval",
    "run_eval_job",
    "evaluate",
    "build_engine",
    "open_source",
    "summarize",
    "summary_of",
    "episode_record",
]


@dataclass
class EvalReport:
    """What an evaluation found (see the module docstring)."""

    name: str
    engine: str
    source: str
    per_env: dict[str, dict[str, float]] = field(default_factory=dict)
    per_tag: dict[str, dict[str, float]] = field(default_factory=dict)
    overall: dict[str, float] = field(default_factory=dict)
    wall_time_s: float = 0.0
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, float] = field(default_factory=dict)
    episodes: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def metrics(self) -> dict[str, float]:
        """Flat ``eval/<env or tag>/<metric>`` numbers (for jobs and loggers)."""
        out = {f"eval/{k}": v for k, v in self.overall.items()}
        for group in (self.per_env, self.per_tag):
            for name, row in group.items():
                out.update({f"eval/{name}/{k}": v for k, v in row.items()})
        return out

    def to_markdown(self) -> str:
        cols = ["episodes", "masked", "success", "valid_action_rate", "mean_turns", "mean_reward", "agent_failures"]
        cols += [c for c in TOOL_METRICS if c in self.overall]  # tool envs' columns when the run had them
        lines = [
            f"# Evaluation: {self.name}",
            "",
            f"engine `{self.engine}`, envs from `{self.source}`, {self.wall_time_s:.1f} s",
            "",
        ]
        for title, rows in (("Per env", self.per_env), ("Per tag", self.per_tag), ("Overall", {"all": self.overall})):
            if not rows:
                continue
            lines += [f"## {title}", "", "| name | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
            for name, row in rows.items():
                cells = [_fmt(row.get(c, 0.0), c) for c in cols]
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
            lines.append("")
        return "\n".join(lines)

    def write_json(self, path: str | Path) -> Path:
        """Write the report (summary and per-episode records included) as JSON to ``path``."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(self.to_dict(), indent=2))
        return out

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write ``report.json`` and ``report.md`` into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(self.to_dict(), indent=2))
        (out / "report.md").write_text(self.to_markdown())
        return out / "report.json", out / "report.md"


def _fmt(value: float, col: str) -> str:
    if col in ("episodes", "masked", "agent_failures"):
        return str(int(value))
    if col in ("success", "valid_action_rate") or col.endswith(("_rate", "_turns")) and col != "mean_turns":
        return f"{100 * value:.1f}%"
    return f"{value:.2f}"


def _row(trajs: list[Trajectory]) -> dict[str, float]:
    scored = [t for t in trajs if not t.masked]
    actions = sum(len(t.turns) for t in scored)
    n = len(scored)
    return {
        "episodes": float(n),
        "masked": float(len(trajs) - n),
        "success": sum(t.success for t in scored) / n if n else 0.0,
        "valid_action_rate": sum(x.action_is_valid for t in scored for x in t.turns) / actions if actions else 0.0,
        "mean_turns": actions / n if n else 0.0,
        "mean_reward": sum(t.final_reward for t in scored) / n if n else 0.0,
        "agent_failures": float(sum(t.failure is not None and t.failure.kind == "agent" for t in scored)),
        **tool_metrics(scored),  # tool envs only: call, parse and schema rates (agentrl/tools/metrics.py)
    }


def episode_record(traj: Trajectory) -> dict[str, Any]:
    """One episode of the report: what it played and how it ended."""
    return {
        "env": traj.env_id,
        "seed": traj.seed,
        "success": bool(traj.success),
        "turns": len(traj.turns),
        "reward": traj.final_reward,
        "valid_actions": sum(t.action_is_valid for t in traj.turns),
        **_tool_counts(traj),
        "terminated": traj.terminated,
        "truncated": traj.truncated,
        "masked": traj.masked,
        "failure": None if traj.failure is None else _failure_text(traj.failure),
    }


def _tool_counts(traj: Trajectory) -> dict[str, int]:
    """A tool env's episode: its calls and mistakes summed over its turns (nothing for a text env's)."""
    counts = [u.tools for u in traj.turns if u.tools is not None]
    return {k: sum(c.get(k, 0) for c in counts) for k in TOOL_COUNT_KEYS} if counts else {}


def _failure_text(f: FailureTag) -> str:
    """``kind: stage: Error: message`` (the message's first line, at most 300 characters)."""
    lines = str(f.message).strip().splitlines()
    message = lines[0][:300] if lines else ""
    return f"{f.kind}: {f.stage}: {f.error}" + (f": {message}" if message else "")


def summary_of(trajs: list[Trajectory]) -> dict[str, float]:
    """``count`` (episodes played), ``masked`` (infra failures, not scored), ``successes`` and
    ``success_rate`` (over the scored episodes)."""
    scored = [t for t in trajs if not t.masked]
    wins = sum(t.success for t in scored)
    return {
        "count": len(trajs),
        "masked": len(trajs) - len(scored),
        "successes": wins,
        "success_rate": wins / len(scored) if scored else 0.0,
    }


def _tags(env_id: str) -> tuple[str, ...]:
    try:
        return envhub.spec(env_id).tags
    except UnknownEnvError:
        return ()


def summarize(
    trajs: list[Trajectory],
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], dict[str, float]]:
    """Per-env, per-tag and overall rows of a report."""
    by_env: dict[str, list[Trajectory]] = {}
    by_tag: dict[str, list[Trajectory]] = {}
    for t in trajs:
        by_env.setdefault(t.env_id, []).append(t)
        for tag in _tags(t.env_id):
            by_tag.setdefault(tag, []).append(t)
    return (
        {k: _row(v) for k, v in sorted(by_env.items())},
        {k: _row(v) for k, v in sorted(by_tag.items())},
        _row(trajs),
    )


def expand_envs(config: EvalConfig) -> list[tuple[str, list[int], dict[str, Any]]]:
    """``(env_id, seeds, kwargs)`` for every env the config names (tags expanded)."""
    out: list[tuple[str, list[int], dict[str, Any]]] = []
    for entry in config.envs:
        seeds = entry.env_seeds(config.seed)
        if entry.env:
            out.append((entry.env, seeds, dict(entry.kwargs)))
            continue
        specs = envhub.list_envs(entry.tag)
        if not specs:
            raise ValueError(f"no env carries the tag {entry.tag!r}; `rockroll envs list` shows the tags")
        out += [(s.id, list(seeds), dict(entry.kwargs)) for s in specs]
    return out


def build_engine(config: EngineConfig) -> LLMEngine:
    """The engine ``config`` describes (heavy libraries load only for the kind asked for)."""
    from rockroll.agentrl.engines import make_engine

    return make_engine(config.kind, **config.args)


async def evaluate(
    engine: LLMEngine,
    source: EnvSource,
    config: EvalConfig,
    on_episode: Callable[[Trajectory, int, int], None] | None = None,
) -> list[Trajectory]:
    """Play every episode the config asks for; ``on_episode(traj, done, total)`` after each one."""
    specs = [
        EpisodeSpec(env_id, seed, f"{env_id}/{seed}", f"{env_id}/{i}", kwargs, env_id)
        for env_id, seeds, kwargs in expand_envs(config)
        for i, seed in enumerate(seeds)
    ]
    manager = make_env_manager(engine, source, config.episode, threads=max(16, config.concurrency))
    sem = asyncio.Semaphore(config.concurrency)

    async def one(spec: EpisodeSpec) -> Trajectory:
        async with sem:
            try:
                return await manager.run(spec)
            except Exception as e:  # noqa: BLE001 - one broken episode must not lose the others' report
                return _errored(spec, e)

    tasks = [asyncio.create_task(one(s)) for s in specs]
    results: list[Trajectory] = []
    try:
        for fut in asyncio.as_completed(tasks):
            traj = await fut
            results.append(traj)
            if on_episode is not None:
                on_episode(traj, len(results), len(specs))
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await manager.drain(60)
        await asyncio.to_thread(manager.shutdown)
    return sorted(results, key=lambda t: (t.env_id, t.seed))


def _errored(spec: EpisodeSpec, e: Exception) -> Trajectory:
    """The record of an episode that raised (a fatal rollout error, a bug): masked, never scored."""
    traj = Trajectory(spec.episode_id, spec.group_id, spec.env_id, spec.seed, env_tag=spec.env_tag)
    cause = getattr(e, "cause", None) or e
    message = str(cause).strip().splitlines()
    traj.failure = FailureTag(
        "infra", getattr(e, "stage", "episode"), type(cause).__name__, message[0] if message else ""
    )
    return traj


def run_eval(
    config: EvalConfig | dict[str, Any] | str | Path,
    *,
    engine: LLMEngine | None = None,
    source: EnvSource | None = None,
    progress: bool = True,
    on_episode: Callable[[Trajectory, int, int], None] | None = None,
    close_engine: bool | None = None,
) -> EvalReport:
    """Run an evaluation and return its report (also written to ``output_dir`` when set).

    ``config``: an :class:`EvalConfig`, its dict form, or a YAML path. ``engine``/``source``
    override the config's. The engine is closed at the end, in the event loop that used it (its
    HTTP clients belong to that loop), when ``close_engine`` is True; None: only an engine built
    here. An episode that fails (infra failure, fatal error) is in the report as masked
    (``summary["masked"]``, its ``failure`` says why); the report is written all the same.
    """
    if isinstance(config, (str, Path)):
        config = load_eval_config(config)
    elif isinstance(config, dict):
        config = from_dict(EvalConfig, config)
    started = time.monotonic()
    close = engine is None if close_engine is None else close_engine
    engine = engine or build_engine(config.engine)
    closed = False
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=sum(len(s) for _, s, _ in expand_envs(config)), desc=config.name, file=sys.stderr, unit="ep")

    def step(traj: Trajectory, done: int, total: int) -> None:
        if bar is not None:
            bar.update(1)
        if on_episode is not None:
            on_episode(traj, done, total)

    async def play(src: EnvSource) -> list[Trajectory]:
        nonlocal closed
        try:
            return await evaluate(engine, src, config, step)
        finally:
            if close:
                closed = True
                await engine.close()

    try:
        with contextlib.nullcontext(source) if source is not None else open_source(config.source) as src:
            trajs = asyncio.run(play(src))
            source_name = src.name
    finally:
        if bar is not None:
            bar.close()
        if close and not closed:  # the source failed to open: the engine never ran
            asyncio.run(engine.close())
    per_env, per_tag, overall = summarize(trajs)
    report = EvalReport(
        config.name,
        engine.name,
        source_name,
        per_env,
        per_tag,
        overall,
        time.monotonic() - started,
        config.model_dump(mode="json"),
        summary_of(trajs),
        [episode_record(t) for t in trajs],
    )
    if config.output_dir:
        report.write(config.output_dir)
    return report


def run_eval_job(ctx: Any) -> dict[str, float]:
    """Adapter for the jobs API: ``ctx.config`` is an eval config dict; sessions come from
    ``ctx.open_session``; progress and metrics go to ``ctx.report``; ``ctx.check()`` cancels."""
    source = CallableSource(ctx.open_session)

    def on_episode(traj: Trajectory, done: int, total: int) -> None:
        ctx.check()
        ctx.report(progress=done / total)
        ctx.log(f"{traj.episode_id}: success={traj.success} turns={len(traj.turns)} masked={traj.masked}")

    report = run_eval(ctx.config, source=source, progress=False, on_episode=on_episode)
    metrics = report.metrics()
    ctx.report(progress=1.0, metrics=metrics)
    return metrics
