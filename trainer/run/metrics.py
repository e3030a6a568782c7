"""Metrics sinks: ``runs/<name>/metrics.jsonl`` (one JSON object per step), TensorBoard, W&B.

Every record has ``step`` and namespaced keys (``env/<tag>/success``, ``actor/pg_loss``,
``critic/value_loss``, ``time/rollout``, ``system/tokens_per_s``, ...). TensorBoard is used when
``tensorboard`` is installed; W&B only when installed *and* asked for.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["MetricsLogger", "read_metrics"]


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class MetricsLogger:
    """Append metrics to ``run_dir/metrics.jsonl`` and mirror them to TensorBoard / W&B."""

    def __init__(
        self,
        run_dir: str | Path,
        *,
        tensorboard: bool = True,
        wandb: bool = False,
        wandb_project: str = "rockroll",
        config: dict | None = None,
        truncate_after: int | None = None,
    ) -> None:
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "metrics.jsonl"
        if truncate_after is not None and self.path.exists():
            # resuming: drop records of steps after the checkpoint (they will be redone)
            keep = [r for r in read_metrics(self.path) if r.get("step", -1) <= truncate_after]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in keep))
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.dir / "tb"))
            except Exception:  # noqa: BLE001 - tensorboard is optional
                self._tb = None
        self._wandb = None
        if wandb:
            try:
                import wandb as _wandb

                self._wandb = _wandb.init(
                    project=wandb_project, name=self.dir.name, config=config or {}, dir=str(self.dir)
                )
            except ImportError:
                self._wandb = None

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Write one record for ``step``."""
        record = {"step": int(step), **{k: _clean(v) for k, v in sorted(metrics.items())}}
        with self.path.open("a") as fh:
            fh.write(json.dumps(record) + "\n")
        if self._tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and math.isfinite(v):
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(dict(metrics), step=step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Records of a ``metrics.jsonl`` file (or of ``<run dir>/metrics.jsonl``)."""
    p = Path(path)
    if p.is_dir():
        p = p / "metrics.jsonl"
    if not p.exists():
        raise FileNotFoundError(f"no metrics at {p}")
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
