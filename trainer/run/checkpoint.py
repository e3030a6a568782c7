"""Checkpoints: weights, optimizers, LR schedules, RNG states, step and the rollout buffer.

Layout of one checkpoint, ``<run dir>/checkpoints/step-<N>/`` (beside a ``latest`` text file
naming the newest)::

    model.safetensors     the policy's weights (``state["workers"]["model"]``)
    critic.safetensors    the critic's, ref.safetensors the reference model's (when the run has them)
    optimizer.pt          the rest of ``state["workers"]``: optimizer and LR-schedule states
    rng_state.pt          Python, NumPy and torch RNG states (tensors and plain values only)
    trainer_state.json    step, weight version, the run's summary so far, what the folder holds
    extra.pt              values JSON cannot hold (the one-step-ahead rollout buffer), when any

Every weight mapping of ``state["workers"]`` (a dict of tensors) is saved as ``<key>.safetensors``;
tensors that share memory (tied embeddings) are saved once and named as aliases in the file's
metadata. ``optimizer.pt`` and ``rng_state.pt`` load with ``torch.load(weights_only=True)``.
:func:`load_checkpoint` gives back the dict :func:`save_checkpoint` was handed (plus ``step`` and
``rng``); :func:`restore_rng` puts the RNGs back so a resumed run continues exactly. A checkpoint
appears whole or not at all (written beside, then renamed). Pruning (``keep``) only deletes
checkpoints older than the one just saved, so it never reaches a checkpoint of a later step.
The Hugging Face exports (``<run dir>/export/...``, :mod:`rockroll.trainer.run.export`) are separate.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "load_latest",
    "load_weights",
    "list_checkpoints",
    "latest_checkpoint",
    "latest_step",
    "is_checkpoint",
    "is_run_dir",
    "rng_state",
    "restore_rng",
]

STATE_FILE = "trainer_state.json"
OPTIMIZER_FILE = "optimizer.pt"
RNG_FILE = "rng_state.pt"
EXTRA_FILE = "extra.pt"
_LEGACY_FILE = "state.pt"  # checkpoints of older rockroll versions: one torch.save pickle
_STEP_DIR = re.compile(r"^step[-_](\d+)$")
_ALIASES = "rockroll_aliases"


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


def _rng_to_plain(state: dict[str, Any]) -> dict[str, Any]:
    """RNG states as tensors, ints, floats and strings (loadable with ``weights_only=True``)."""
    import torch

    name, keys, pos, has_gauss, gauss = state["numpy"]
    return {
        **state,
        "numpy": (str(name), torch.from_numpy(keys.astype("int64")), int(pos), int(has_gauss), float(gauss)),
    }


def _rng_from_plain(state: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    name, keys, pos, has_gauss, gauss = state["numpy"]
    return {**state, "numpy": (name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss)}


# ------------------------------------------------------------------------------------------ weights
def _is_weights(value: Any) -> bool:
    import torch

    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())
    )


def _save_weights(weights: dict[str, Any], path: Path) -> None:
    """``weights`` as safetensors; a tensor that is a view of one already saved is stored as an alias."""
    from safetensors.torch import save_file

    seen: dict[tuple, str] = {}
    storages: set[int] = set()
    tensors: dict[str, Any] = {}
    aliases: dict[str, str] = {}
    for key, value in weights.items():
        t = value.detach()
        ident = (t.device, t.dtype, t.data_ptr(), tuple(t.shape), tuple(t.stride()))
        if ident in seen:
            aliases[key] = seen[ident]
            continue
        seen[ident] = key
        ptr = t.untyped_storage().data_ptr() if t.numel() else -1
        shared = ptr in storages
        storages.add(ptr)
        t = t.cpu()
        tensors[key] = t.clone() if shared or not t.is_contiguous() else t
    save_file(tensors, str(path), metadata={"format": "pt", _ALIASES: json.dumps(aliases)})


def load_weights(path: str | Path, name: str = "model") -> dict[str, Any]:
    """The ``name`` weights of a checkpoint directory (or a ``.safetensors`` file), on CPU, aliases restored."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = Path(path)
    if path.is_dir():
        if not (path / f"{name}.safetensors").is_file() and (path / _LEGACY_FILE).is_file():
            return load_checkpoint(path)["workers"][name]
        path = path / f"{name}.safetensors"
    tensors = load_file(str(path), device="cpu")
    with safe_open(str(path), framework="pt") as f:
        aliases = json.loads((f.metadata() or {}).get(_ALIASES, "{}"))
    order = {**tensors, **{k: None for k in aliases}}  # keys as saved: aliases point at a saved tensor
    return {k: tensors[aliases[k]] if k in aliases else v for k, v in order.items()}


# ------------------------------------------------------------------------------------- save / load
def _json_value(value: Any) -> bool:
    """Whether ``value`` survives a JSON round trip unchanged."""
    try:
        return json.loads(json.dumps(value)) == value
    except (TypeError, ValueError):
        return False


def save_checkpoint(run_dir: str | Path, step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Save ``state`` (plus RNG states) as checkpoint ``step``; keep the newest ``keep`` up to this step."""
    import torch

    root = Path(run_dir) / "checkpoints"
    target = root / f"step-{step}"
    tmp = root / f".tmp-step-{step}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    workers = dict(state.get("workers") or {})
    weights = sorted(k for k, v in workers.items() if _is_weights(v))
    for key in weights:
        _save_weights(workers.pop(key), tmp / f"{key}.safetensors")
    torch.save(workers, tmp / OPTIMIZER_FILE)
    torch.save(_rng_to_plain(rng_state()), tmp / RNG_FILE)
    rest = {k: v for k, v in state.items() if k not in ("workers", "step", "rng")}
    extra = {k: v for k, v in rest.items() if not _json_value(v)}
    if extra:
        torch.save(extra, tmp / EXTRA_FILE)
    meta = {"step": step, "weights": weights, "extra": sorted(extra)}
    meta["state"] = {k: v for k, v in rest.items() if k not in extra}
    (tmp / STATE_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    old = list_checkpoints(run_dir).get(step)
    for stale in (target, old):
        if stale is not None and stale.exists():
            shutil.rmtree(stale)
    tmp.rename(target)
    (root / "latest").write_text(target.name + "\n")
    ckpts = list_checkpoints(run_dir)
    older = sorted(s for s in ckpts if s < step)  # a later step is no checkpoint of this run's past: kept
    for s in older[: max(len(older) - (keep - 1), 0)]:
        shutil.rmtree(ckpts[s], ignore_errors=True)
    return target


def is_run_dir(path: str | Path) -> bool:
    """Whether ``path`` looks like one training run's directory (safe to delete for ``--overwrite``)."""
    path = Path(path).resolve()
    if path == Path.cwd().resolve() or path in Path.cwd().resolve().parents:
        return False
    return any((path / n).exists() for n in ("config.yaml", "checkpoints", "metrics.jsonl", "summary.json"))


def is_checkpoint(path: str | Path) -> bool:
    """Whether ``path`` is a complete checkpoint directory (this layout, or an older ``state.pt``)."""
    path = Path(path)
    return (path / STATE_FILE).is_file() or (path / _LEGACY_FILE).is_file()


def load_checkpoint(path: str | Path, *, full: bool = True) -> dict[str, Any]:
    """The state dict saved in checkpoint directory ``path`` (tensors on CPU).

    ``full=False`` reads only the weights and ``trainer_state.json`` (step, version...): no optimizer,
    RNG or rollout buffer.
    """
    import torch

    path = Path(path)
    if not (path / STATE_FILE).is_file() and (path / _LEGACY_FILE).is_file():
        return torch.load(path / _LEGACY_FILE, map_location="cpu", weights_only=False)
    meta = json.loads((path / STATE_FILE).read_text())
    workers = torch.load(path / OPTIMIZER_FILE, map_location="cpu", weights_only=True) if full else {}
    for key in meta["weights"]:
        workers[key] = load_weights(path, key)
    state: dict[str, Any] = {**meta["state"], "workers": workers, "step": meta["step"]}
    if not full:
        return state
    if meta["extra"]:
        state.update(torch.load(path / EXTRA_FILE, map_location="cpu", weights_only=False))
    state["rng"] = _rng_from_plain(torch.load(path / RNG_FILE, map_location="cpu", weights_only=True))
    return state


def list_checkpoints(run_dir: str | Path) -> dict[int, Path]:
    """``step -> directory`` of the run's complete checkpoints."""
    root = Path(run_dir) / "checkpoints"
    found: dict[int, Path] = {}
    for p in sorted(root.iterdir()) if root.is_dir() else []:
        m = _STEP_DIR.match(p.name)
        if m and p.is_dir() and is_checkpoint(p):
            found[int(m.group(1))] = p
    return found


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest checkpoint directory: the one ``latest`` names, else the highest step (None: none)."""
    root = Path(run_dir) / "checkpoints"
    marker = root / "latest"
    if marker.is_file():
        named = root / marker.read_text().strip()
        if marker.read_text().strip() and is_checkpoint(named):
            return named
    found = list_checkpoints(run_dir)
    return found[max(found)] if found else None


def latest_step(run_dir: str | Path) -> int | None:
    """Step of the newest checkpoint of the run (None when there is none)."""
    path = latest_checkpoint(run_dir)
    if path is None:
        return None
    m = _STEP_DIR.match(path.name)
    return int(m.group(1)) if m else int(json.loads((path / STATE_FILE).read_text())["step"])


def load_latest(run_dir: str | Path) -> dict[str, Any] | None:
    """The newest checkpoint's state dict (None when the run has none)."""
    path = latest_checkpoint(run_dir)
    return None if path is None else load_checkpoint(path)
