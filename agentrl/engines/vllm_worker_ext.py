"""Methods mixed into each vLLM worker (``worker_extension_cls``), called by name.

vLLM mixes :class:`WeightSyncExtension` into its worker class when the engine is built with
``worker_extension_cls="rockroll.agentrl.engines.vllm_worker_ext.WeightSyncExtension"``; the host
(:mod:`rockroll.agentrl.engines.vllm_host`) then calls ``collective_rpc("rockroll_load_weights",
kwargs=...)``. Only a method *name* and plain arguments (a folder path as ``str``, or safetensors
``bytes``) cross vLLM's serializer: no pickled function (refused by vLLM V1), no tensor argument
(it would arrive as a Python list).

Loading goes through the runner's ``reload_weights`` (vLLM's in-place layerwise reload), which
re-runs each reloaded layer's post-load processing: vLLM's CPU path repacks linear weights after
loading (``dispatch_cpu_unquantized_gemm`` keeps a packed copy and may empty ``layer.weight``), so a
plain ``model.load_weights`` into the original parameters fails. A layer that loads no weight of
its own is skipped by that reload, which leaves a tied output layer (``lm_head`` sharing
``embed_tokens.weight``) with its old packed copy; :func:`refresh_tied_layers` re-runs its
processing.

Runs inside the vLLM venv; torch and safetensors are imported lazily so that importing this module
(the layer tests import every module) loads nothing heavy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["WeightSyncExtension", "iter_safetensors", "refresh_tied_layers"]


def iter_safetensors(path: str | None = None, blob: bytes | None = None) -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` of every tensor in a folder of ``*.safetensors`` files, or in ``blob``."""
    if blob is not None:
        from safetensors.torch import load

        yield from load(blob).items()
        return
    if path is None:
        raise ValueError("give a folder of safetensors files or safetensors bytes")
    from safetensors import safe_open

    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors file in {path}")
    for file in files:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                yield name, f.get_tensor(name)


def refresh_tied_layers(model: Any) -> list[str]:
    """Re-run post-load processing of layers whose weight is another layer's (tied embeddings).

    Returns the names of the refreshed layers. On GPU the processing of an unquantized embedding
    does nothing; on CPU it rebuilds the packed copy the output layer computes logits with.
    """
    owners: dict[int, str] = {}
    refreshed: list[str] = []
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        method = getattr(module, "quant_method", None)
        if weight is None or method is None or not hasattr(weight, "data_ptr") or weight.numel() == 0:
            continue
        key = weight.data_ptr()
        if key in owners:
            method.process_weights_after_loading(module)
            refreshed.append(name)
        else:
            owners[key] = name
    return refreshed


class WeightSyncExtension:
    """Worker methods the host calls by name (``self`` is vLLM's worker)."""

    model_runner: Any

    def rockroll_load_weights(self, path: str | None = None, blob: bytes | None = None) -> dict[str, Any]:
        """Reload the model's weights in place from ``path`` (a folder) or ``blob`` (bytes).

        Returns ``{"tensors": count, "tied_refreshed": [layer names]}``.
        """
        import torch

        count = 0

        def counted() -> Iterator[tuple[str, Any]]:
            nonlocal count
            for item in iter_safetensors(path, blob):
                count += 1
                yield item

        with torch.no_grad():
            self.model_runner.reload_weights(weights_iterator=counted(), is_checkpoint_format=True)
            tied = refresh_tied_layers(self.model_runner.get_model())
        return {"tensors": count, "tied_refreshed": tied}

    def rockroll_ping(self) -> str:
        """A cheap call to check the extension is mixed in."""
        return "pong"
