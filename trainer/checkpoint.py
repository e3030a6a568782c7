"""Checkpoints: weights, optimizers, LR schedules, RNG states, step and the rollout buffer.

Layout: ``<run dir>/checkpoints/step_<N>/state.pt`` (one ``torch.save`` file) and a
``latest`` text file naming the newest. :func:`load_latest` returns the dict saved, and
:func:`restore_rng` puts back Python, NumPy and torch RNGs so a resumed run continues exactly.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

__all__ = ["save_checkpoint", "load_latest", "rng_state", "restore_rng", "latest_step"]


def rng_state() -> dict[str, Any]:
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run_dir: str | Path, step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Save ``state`` (plus RNG states) as checkpoint ``step``; keep the newest ``keep``."""
    import torch

    root = Path(run_dir) / "checkpoints"
    target = root / f"step_{step:07d}"
    tmp = root / f".tmp_step_{step:07d}"
    tmp.mkdir(parents=True, exist_ok=True)
    torch.save({**state, "step": step, "rng": rng_state()}, tmp / "state.pt")
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    (root / "latest").write_text(target.name)
    for old in sorted(p for p in root.glob("step_*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def latest_step(run_dir: str | Path) -> int | None:
    """Step of the newest checkpoint of the run (None when there is none)."""
    marker = Path(run_dir) / "checkpoints" / "latest"
    if not marker.exists():
        return None
    return int(marker.read_text().strip().split("_")[-1])


def load_latest(run_dir: str | Path) -> dict[str, Any] | None:
    """The newest checkpoint's state dict (None when the run has none)."""
    import torch

    marker = Path(run_dir) / "checkpoints" / "latest"
    if not marker.exists():
        return None
    return torch.load(Path(run_dir) / "checkpoints" / marker.read_text().strip() / "state.pt", weights_only=False)
