"""Weights handed from the trainer to an inference engine: a folder of safetensors, or their bytes.

The trainer passes either a folder that holds ``*.safetensors`` files (a checkpoint it saved) or a
state dict (``name -> tensor``, Hugging Face checkpoint names). :func:`stage_weights` turns a
state dict into what crosses the process boundary: a ``model.safetensors`` file in a folder of the
engine's own (``transport="folder"``) or the same file's bytes (``transport="bytes"``). Never a
pickle, never Python lists of numbers.

A tensor that shares its storage with one already staged is left out: with tied input/output
embeddings ``lm_head.weight`` *is* ``embed_tokens.weight``, and engines load the output layer
from the embeddings (safetensors refuses shared tensors anyway).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["Transport", "StagedWeights", "check_weights_folder", "unique_tensors", "stage_weights"]

Transport = Literal["folder", "bytes"]
WEIGHTS_FILE = "model.safetensors"


@dataclass(frozen=True)
class StagedWeights:
    """One weight update, ready to send: ``path`` (a folder) or ``blob`` (safetensors bytes)."""

    path: str | None
    blob: bytes
    tensors: int  # tensors staged (None known when the trainer gave a folder: -1)
    seconds: float  # time spent serialising on the trainer's side

    def message(self, version: int) -> dict[str, Any]:
        """The JSON part of an ``update_weights`` request (the blob travels as the frame payload)."""
        return {"op": "update_weights", "version": int(version), **({} if self.blob else {"path": self.path})}


def check_weights_folder(path: str | Path) -> Path:
    """``path`` as an absolute folder holding ``*.safetensors`` files, or a ``ValueError`` saying why not."""
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise ValueError(
            f"weights folder {folder} does not exist; pass a folder of *.safetensors files or a state dict"
        )
    if not any(folder.glob("*.safetensors")):
        raise ValueError(f"{folder} holds no *.safetensors file; save the weights with safetensors (save_pretrained)")
    return folder


def unique_tensors(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Detached, contiguous CPU copies of ``state_dict``'s tensors, tied duplicates left out."""
    seen: set[tuple[int, tuple[int, ...], str]] = set()
    out: dict[str, Any] = {}
    for name, tensor in state_dict.items():
        key = (int(tensor.data_ptr()), tuple(tensor.shape), str(tensor.dtype))
        if key in seen and tensor.numel() > 0:
            continue  # tied: the engine loads it through the tensor it shares storage with
        seen.add(key)
        out[name] = tensor.detach().to("cpu").contiguous()
    return out


def stage_weights(
    weights: Mapping[str, Any] | str | Path, transport: Transport, workdir: str | Path, version: int
) -> StagedWeights:
    """Stage ``weights`` (a folder or a state dict) for the engine.

    A folder is passed as it is (whatever ``transport`` says). A state dict becomes
    ``workdir/v{version}/model.safetensors`` (written to a temporary name, then renamed) or, with
    ``transport="bytes"``, the bytes of that file.
    """
    if isinstance(weights, (str, Path)):
        return StagedWeights(path=str(check_weights_folder(weights)), blob=b"", tensors=-1, seconds=0.0)
    if transport not in ("folder", "bytes"):
        raise ValueError(f"weight transport must be 'folder' or 'bytes', got {transport!r}")
    from safetensors.torch import save, save_file

    start = time.perf_counter()
    tensors = unique_tensors(weights)
    if transport == "bytes":
        blob = save(tensors)
        return StagedWeights(path=None, blob=blob, tensors=len(tensors), seconds=time.perf_counter() - start)
    folder = Path(workdir) / f"v{int(version)}"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (WEIGHTS_FILE + ".tmp")
    save_file(tensors, str(tmp))
    os.replace(tmp, folder / WEIGHTS_FILE)
    return StagedWeights(path=str(folder), blob=b"", tensors=len(tensors), seconds=time.perf_counter() - start)
