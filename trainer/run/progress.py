"""Progress of ``rockroll train``: rich bars on a terminal, one plain line per step otherwise.

:class:`TrainProgress` takes the pipeline's two callbacks (:data:`rockroll.trainer.pipeline.ProgressCallback`
after every RL step, and the events ``sft_step``, ``eval_start`` and ``eval_end``). On a TTY it shows
bars for the SFT warm start, each evaluation and the RL steps. When stdout is not a TTY (CI, nohup,
a job's log) it prints, flushed at once, one line per RL step and per evaluation with the key
metrics, and up to about 20 lines for the warm start (every ``steps // 20`` steps and the last)::

    sft 40/800  loss 0.8123  5012 tok/s
    eval: success 0.375 on 8 episodes (1.2s)
    step 3/50  success 0.250  reward 0.312  pg_loss -0.0121  kl 0.0003  eval 0.375  2.1s
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["TrainProgress", "step_line", "eval_line"]

_ENV_SUCCESS = re.compile(r"^env/[^/]+/success$")


def _first(metrics: dict[str, float], pattern: re.Pattern[str]) -> float | None:
    return next((v for k, v in metrics.items() if pattern.match(k)), None)


def eval_line(prefix: str, metrics: dict[str, float], episodes: int) -> str:
    """``eval: success 0.375 on 8 episodes (1.2s)`` (``prefix`` names the evaluation)."""
    succ = _first(metrics, re.compile(rf"^{re.escape(prefix)}/[^/]+/success$"))
    name = {"eval": "eval", "eval_pre_sft": "eval before warm start", "sft_val": "warm-start validation"}.get(
        prefix, prefix
    )
    text = f"{name}: success {succ:.3f}" if succ is not None else f"{name}: done"
    return text + f" on {episodes} episodes ({metrics.get('time/eval', 0.0):.1f}s)"


def step_line(step: int, total: int, metrics: dict[str, float]) -> str:
    """``step 3/50  success 0.250  reward 0.312  pg_loss -0.0121 ...``: the key metrics of one RL step."""
    parts = [f"step {step + 1}/{total}"]
    succ = _first(metrics, _ENV_SUCCESS)
    if succ is not None:
        parts.append(f"success {succ:.3f}")
    reward = _first(metrics, re.compile(r"^env/[^/]+/reward$"))
    if reward is not None:
        parts.append(f"reward {reward:.3f}")
    for key, label in (("actor/pg_loss", "pg_loss"), ("actor/kl_loss", "kl"), ("critic/value_loss", "vf_loss")):
        if key in metrics:
            parts.append(f"{label} {metrics[key]:.4g}")
    ev = _first(metrics, re.compile(r"^eval/[^/]+/success$"))
    if ev is not None:
        parts.append(f"eval {ev:.3f}")
    if "time/step" in metrics:
        parts.append(f"{metrics['time/step']:.1f}s")
    if "time/run_s" in metrics and step + 1 < total:  # the run's mean pace so far, evaluations included
        left = metrics["time/run_s"] / (step + 1) * (total - step - 1)
        parts.append(f"eta {int(left // 60)}m{int(left % 60):02d}s")
    if metrics.get("rollout/cap_hit_alert"):
        parts.append(f"WARNING {metrics.get('rollout/cap_hit_share', 0.0):.0%} of answers hit the token cap")
    return "  ".join(parts)


class TrainProgress:
    """Progress display of one training run (use as a context manager around ``run_training``).

    Args:
        console: a rich Console (its ``is_terminal`` picks bars or plain lines).
        total_steps: RL steps of the run; ``start_step`` the first one (a resumed run's).
        enabled: False shows nothing (``logging.progress: false``).
        write: where plain lines go instead of stdout (a job's log: ``ctx.log``); it implies plain lines.
    """

    def __init__(
        self,
        console: Any,
        total_steps: int,
        *,
        start_step: int = 0,
        enabled: bool = True,
        write: Callable[[str], None] | None = None,
    ) -> None:
        self.console = console
        self.total = total_steps
        self.start = start_step
        self.enabled = enabled
        self.write = write
        self.tty = enabled and write is None and bool(console.is_terminal)
        self._prog: Any = None
        self._tasks: dict[str, Any] = {}
        self._episodes = 0

    def __enter__(self) -> TrainProgress:
        if self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._prog = Progress(
                TextColumn("[bold blue]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[info]}"),
                console=self.console,
            )
            self._prog.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._prog is not None:
            self._prog.__exit__(*exc)
            self._prog = None

    def _line(self, text: str) -> None:
        if self.write is not None:
            self.write(text)
            return
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def _task(self, name: str, description: str, total: float | None, completed: int = 0) -> Any:
        if name not in self._tasks:
            self._tasks[name] = self._prog.add_task(description, total=total, completed=completed, info="")
        return self._tasks[name]

    # -------------------------------------------------------------- the pipeline's callbacks
    def on_step(self, step: int, total: int, metrics: dict[str, float]) -> None:
        """After every RL step (the pipeline's ``progress_callback``)."""
        if not self.enabled:
            return
        if not self.tty:
            self._line(step_line(step, total, metrics))
            return
        task = self._task("train", "train", total, self.start)
        succ = _first(metrics, _ENV_SUCCESS)
        ev = _first(metrics, re.compile(r"^eval/[^/]+/success$"))
        info = (f"train success {succ:.2f}" if succ is not None else "") + (
            f"  eval {ev:.2f}" if ev is not None else ""
        )
        self._prog.update(task, completed=step + 1, total=total, info=info)

    def on_event(self, kind: str, info: dict[str, Any]) -> None:
        """``sft_step`` (step, total, metrics), ``eval_start`` (prefix, episodes), ``eval_end`` (prefix, metrics)."""
        if not self.enabled:
            return
        if kind == "sft_step":
            self._sft(int(info["step"]), int(info["total"]), info.get("metrics", {}))
        elif kind == "eval_start":
            self._episodes = int(info.get("episodes", 0))
            if self.tty:
                self._task("eval", f"eval ({self._episodes} episodes)", None)
            elif self.write is not None:  # a job's log: say what the next minutes are spent on
                self._line(f"eval: {self._episodes} episodes ...")
        elif kind == "eval_end":
            line = eval_line(str(info.get("prefix", "eval")), info.get("metrics", {}), self._episodes)
            if not self.tty:
                self._line(line)
                return
            task = self._tasks.pop("eval", None)
            if task is not None:
                self._prog.remove_task(task)
            self._prog.console.print(line, markup=False, highlight=False)

    def _sft(self, step: int, total: int, metrics: dict[str, float]) -> None:
        loss = metrics.get("sft/loss")
        text = (f"loss {loss:.4f}" if loss is not None else "") + (
            f"  {metrics['sft/tokens_per_s']:.0f} tok/s" if "sft/tokens_per_s" in metrics else ""
        )
        if not self.tty:
            every = max(1, total // 20)
            if (step + 1) % every == 0 or step + 1 == total:
                self._line(f"sft {step + 1}/{total}  {text}".rstrip())
            return
        task = self._task("sft", "warm start (SFT)", total)
        self._prog.update(task, completed=step + 1, info=text)
