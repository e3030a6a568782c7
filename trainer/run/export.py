"""Hugging Face export: a policy as a ``save_pretrained`` directory that every rockroll loader reads.

:func:`export_model` writes an in-memory model and tokenizer: weights in safetensors, ``config.json``,
the tokenizer (``tokenizer.json`` and its config), the chat template, and ``generation_config.json``
with the tokenizer's EOS and pad ids. For the tiny local model the marker file
(:data:`~rockroll.agentrl.models.tiny.TINY_MARKER`) is kept, so
:func:`~rockroll.agentrl.models.tiny.load_model_and_tokenizer` (what ``rockroll eval``, ``serve-model`` and
the ``hf`` engine use) loads the export exactly as it loads the original. The directory appears
whole or not at all (written beside the target, then renamed).

:func:`export_run` exports from a training run's checkpoints (``rockroll export RUN``)::

    runs/NAME/config.yaml                          model.path: the base model (architecture, tokenizer)
    runs/NAME/checkpoints/step-7/model.safetensors the policy's weights (trainer/run/checkpoint.py)
    runs/NAME/export/step-7/  export/final/  export/warmstart/

``step``: a checkpoint's step number; ``"final"`` (or None) the newest checkpoint; ``"warmstart"``
the weights after the SFT warm start, which the training pipeline exports itself (to
``export/warmstart/``) or saves as a checkpoint named ``warmstart``. Such an export also holds
:data:`EXPORT_MARKER` (``rockroll_export.json``): where it came from (run, step, weight version, base
model) and the tool-call parser the run wrote its calls in (``tool_call_parser``: the run's
``rollout.episode.tool_call_parser``, the default of ``serve-model --tool-call-parser``). :func:`export_weights` does the same for a state dict in memory (``workers.policy_weights()``).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rockroll.agentrl.models.tiny import TINY_MARKER, load_model_and_tokenizer
from rockroll.envs.config_loader import read_yaml
from rockroll.envs.errors import RockrollError
from rockroll.trainer.run.checkpoint import is_checkpoint, load_checkpoint

__all__ = [
    "ExportError",
    "EXPORT_MARKER",
    "export_model",
    "export_weights",
    "export_run",
    "find_checkpoint",
    "list_checkpoints",
]

#: provenance file written into every export (``serve-model`` reads its ``tool_call_parser``:
#: :data:`rockroll.agentrl.serving.tool_calls.EXPORT_FILE`)
EXPORT_MARKER = "rockroll_export.json"
#: the tool-call style of a run whose config names none (``rollout.episode.tool_call_parser``'s default)
DEFAULT_TOOL_CALL_PARSER = "hermes"
_STEP_DIR = re.compile(r"^step[-_](\d+)$")


class ExportError(RockrollError, ValueError):
    """An export cannot be made (no such run or checkpoint, base model missing, weights that do not fit)."""


# ---------------------------------------------------------------------------------------------- model
def export_model(
    model: Any,
    tokenizer: Any,
    out_dir: str | Path,
    *,
    source_dir: str | Path | None = None,
    generation_config: Any = None,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` and ``tokenizer`` to ``out_dir`` as a Hugging Face directory; return its path.

    Args:
        model: a transformers causal LM (a wrapper with ``.module``, as DDP, is unwrapped). It is
            saved in its current dtype; it is not moved or changed.
        tokenizer: its tokenizer (the chat template it carries is saved with it).
        out_dir: the export directory; an existing one is replaced.
        source_dir: the model directory the weights started from. Its tiny-model marker is
            copied (None: the directory the model was loaded from, when it is one).
        generation_config: a ``transformers.GenerationConfig`` or a dict of fields to set (e.g.
            ``{"temperature": 0.7, "do_sample": True}``) over the model's own; EOS and pad ids
            default to the tokenizer's.
        metadata: JSON-able provenance (run, step, eval success, ...) written to
            :data:`EXPORT_MARKER` in the export.
    """
    out = Path(out_dir)
    model = _unwrap(model)
    source = _source_dir(model, source_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        _save_model(model, tmp)
        tokenizer.save_pretrained(str(tmp))
        _ensure_chat_template(tokenizer, tmp)
        _generation_config(model, tokenizer, generation_config).save_pretrained(str(tmp))
        if source is not None and (source / TINY_MARKER).is_file():
            shutil.copy2(source / TINY_MARKER, tmp / TINY_MARKER)
        if metadata is not None:
            (tmp / EXPORT_MARKER).write_text(json.dumps(metadata, indent=2, default=str) + "\n")
        for f in tmp.rglob("*"):  # mkdtemp and safetensors write owner-only files; an export is for sharing
            f.chmod(0o755 if f.is_dir() else 0o644)
        tmp.chmod(0o755)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _unwrap(model: Any) -> Any:
    while not hasattr(model, "save_pretrained") and hasattr(model, "module"):
        model = model.module
    if not hasattr(model, "save_pretrained"):
        raise ExportError(f"{type(model).__name__} is not a transformers model (it has no save_pretrained)")
    return model


def _source_dir(model: Any, source_dir: str | Path | None) -> Path | None:
    if source_dir is not None:
        return Path(source_dir)
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
    return Path(name) if name and Path(name).is_dir() else None


def _save_model(model: Any, out: Path) -> None:
    import inspect

    kwargs: dict[str, Any] = {}
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        kwargs["safe_serialization"] = True  # transformers 4.x; 5.x writes safetensors only
    model.save_pretrained(str(out), **kwargs)
    if not any(out.glob("*.safetensors")):
        raise ExportError(f"save_pretrained wrote no safetensors file into {out}")


def _ensure_chat_template(tokenizer: Any, out: Path) -> None:
    """Older transformers keep the template inside tokenizer_config.json; newer write chat_template.jinja."""
    template = getattr(tokenizer, "chat_template", None)
    if not isinstance(template, str) or (out / "chat_template.jinja").is_file():
        return
    config = out / "tokenizer_config.json"
    if config.is_file() and json.loads(config.read_text()).get("chat_template"):
        return
    (out / "chat_template.jinja").write_text(template)


def _generation_config(model: Any, tokenizer: Any, override: Any) -> Any:
    import copy

    from transformers import GenerationConfig

    if isinstance(override, GenerationConfig):
        gen = copy.deepcopy(override)
    else:
        base = getattr(model, "generation_config", None)
        gen = copy.deepcopy(base) if base is not None else GenerationConfig.from_model_config(model.config)
        for key, value in dict(override or {}).items():
            setattr(gen, key, value)
    overridden = override.to_dict() if isinstance(override, GenerationConfig) else dict(override or {})
    if "eos_token_id" not in overridden and tokenizer.eos_token_id is not None:
        gen.eos_token_id = tokenizer.eos_token_id
    if "pad_token_id" not in overridden:
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if pad is not None:
            gen.pad_token_id = pad
    return gen


# ------------------------------------------------------------------------------------------------ run
def list_checkpoints(run_dir: str | Path) -> dict[int, Path]:
    """``step -> checkpoint directory`` of a run (``step_0000007`` and ``step-7`` names both count)."""
    root = Path(run_dir) / "checkpoints"
    found: dict[int, Path] = {}
    for p in sorted(root.iterdir()) if root.is_dir() else []:
        m = _STEP_DIR.match(p.name)
        if m and is_checkpoint(p):
            found[int(m.group(1))] = p
    return found


def find_checkpoint(run_dir: str | Path, step: int | str | None = None) -> tuple[str, Path]:
    """``(export label, checkpoint directory)`` for ``step`` (see :func:`export_run`)."""
    run = Path(run_dir)
    label = _label(step)
    if label == "warmstart":
        ckpt = run / "checkpoints" / "warmstart"
        if is_checkpoint(ckpt):
            return label, ckpt
        raise ExportError(
            f"run {run} has no warm-start weights (no export/warmstart/ and no checkpoints/warmstart/); "
            "the pipeline writes them when the run has an SFT warm start (sft.steps > 0)"
        )
    ckpts = list_checkpoints(run)
    if not ckpts:
        raise ExportError(
            f"run {run} has no checkpoints under {run / 'checkpoints'} (a run saves one every checkpoint.every "
            "steps and at its end)"
        )
    if label == "final":
        marker = run / "checkpoints" / "latest"
        named = run / "checkpoints" / marker.read_text().strip() if marker.is_file() else None
        return label, named if named is not None and is_checkpoint(named) else ckpts[max(ckpts)]
    n = int(label.removeprefix("step-"))
    if n not in ckpts:
        kept = ", ".join(str(s) for s in sorted(ckpts))
        raise ExportError(f"run {run} has no checkpoint of step {n}; kept steps: {kept} (or use final)")
    return label, ckpts[n]


def _label(step: int | str | None) -> str:
    if step is None or step == "final":
        return "final"
    if step == "warmstart":
        return "warmstart"
    if isinstance(step, str) and step.removeprefix("step-").removeprefix("step_").isdigit():
        step = int(step.removeprefix("step-").removeprefix("step_"))
    if isinstance(step, int) and not isinstance(step, bool) and step >= 0:
        return f"step-{step}"
    raise ExportError(f"step must be a checkpoint step (an integer >= 0), 'final' or 'warmstart'; got {step!r}")


def _tool_call_parser(run: Path) -> str:
    """The tool-call style the run trained with (``rollout.episode.tool_call_parser`` of its config.yaml)."""
    config = run / "config.yaml"
    data = read_yaml(config) if config.is_file() else {}
    rollout = data.get("rollout") if isinstance(data.get("rollout"), dict) else {}
    episode = rollout.get("episode") if isinstance(rollout.get("episode"), dict) else {}
    parser = episode.get("tool_call_parser")
    return parser if isinstance(parser, str) and parser else DEFAULT_TOOL_CALL_PARSER


def _base_model(run: Path, base_model: str | Path | None) -> Path:
    """The run's base model directory: ``base_model``, else model.path of the run's config.yaml."""
    if base_model is not None:
        path = Path(base_model)
        if not (path / "config.json").is_file():
            raise ExportError(f"base model {path} is not a Hugging Face model directory (no config.json)")
        return path
    config = run / "config.yaml"
    data = read_yaml(config) if config.is_file() else {}
    model_cfg = data.get("model") if isinstance(data.get("model"), dict) else {}
    if not model_cfg.get("path"):
        raise ExportError(f"{config} names no model.path; pass the base model directory (--base-model)")
    raw = Path(str(model_cfg["path"]))
    # a relative model.path is relative to where training ran: here, or an ancestor of the run dir
    candidates = [raw] if raw.is_absolute() else [raw, *(a / raw for a in run.resolve().parents)]
    for path in candidates:
        if (path / "config.json").is_file():
            return path
    raise ExportError(
        f"the run's base model {raw} (model.path in {config}) is not found; pass its directory (--base-model)"
    )


def export_weights(
    weights: dict[str, Any],
    base_model: str | Path,
    out_dir: str | Path,
    *,
    generation_config: Any = None,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Export a policy given as a state dict (``workers.policy_weights()``, a checkpoint's
    ``state["workers"]["model"]``) on the architecture and tokenizer of ``base_model``.

    The model is built in the weights' dtype; keys may carry DDP's ``module.`` or torch.compile's
    ``_orig_mod.`` prefix. Weights that do not fit the base model raise :class:`ExportError`.
    """
    import torch

    clean = {}
    for key, value in weights.items():
        for prefix in ("module.", "_orig_mod."):  # DDP and torch.compile wrappers
            key = key.removeprefix(prefix)
        clean[key] = value
    floats = [v.dtype for v in clean.values() if torch.is_tensor(v) and v.is_floating_point()]
    dtype = str(floats[0]).removeprefix("torch.") if floats else None
    model, tokenizer = load_model_and_tokenizer(base_model, device="cpu", dtype=dtype)
    try:
        model.load_state_dict(clean, strict=True)
    except RuntimeError as e:
        raise ExportError(f"the weights do not fit the base model {base_model}: {str(e)[:500]}") from e
    return export_model(
        model, tokenizer, out_dir, source_dir=base_model, generation_config=generation_config, metadata=metadata
    )


def export_run(
    run_dir: str | Path,
    step: int | str | None = None,
    out: str | Path | None = None,
    *,
    base_model: str | Path | None = None,
) -> Path:
    """Export the policy of a run's checkpoint (see the module docstring); return the export directory.

    Args:
        run_dir: ``runs/NAME``.
        step: a checkpoint step, ``"final"``/None (the pipeline's selected policy when it wrote
            ``export/final``, else the newest checkpoint) or ``"warmstart"``.
        out: the export directory (default ``run_dir/export/{step-N|final|warmstart}``).
        base_model: the model directory the run started from (default: model.path of the run's
            config.yaml); it gives the architecture, tokenizer and chat template.
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise ExportError(f"no run directory {run}")
    label = _label(step)
    target = Path(out) if out is not None else run / "export" / label
    exported = run / "export" / label
    if label in ("warmstart", "final") and (exported / "config.json").is_file():  # written by the pipeline itself
        if target.resolve() != exported.resolve():
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(exported, target)
        return target
    label, ckpt = find_checkpoint(run, label)
    base = _base_model(run, base_model)
    state = load_checkpoint(ckpt, full=False)  # the weights, step and version (no optimizer)
    workers = state.get("workers") if isinstance(state, dict) else None
    weights = workers.get("model") if isinstance(workers, dict) else None
    if not isinstance(weights, dict) or not weights:
        raise ExportError(f"checkpoint {ckpt} holds no policy weights (model.safetensors)")
    provenance = {
        "run_dir": str(run.resolve()),
        "export": label,
        "checkpoint": str(ckpt.resolve()),
        "step": state.get("step"),
        "weight_version": state.get("version"),
        "base_model": str(base.resolve()),
        "tool_call_parser": _tool_call_parser(run),
    }
    try:
        return export_weights(weights, base, target, metadata=provenance)
    except ExportError as e:
        raise ExportError(f"{ckpt}: {e}") from e
