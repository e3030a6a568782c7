"""A TorchScript forward pass of Llama-style decoders (Qwen2, Llama) for the hf engine's slots path.

Why: the hf engine decodes in a thread of the process that also runs the rollout's event loop.
Every torch operation called from Python gives up the GIL and has to win it back; while the event
loop's thread runs Python, each of the ~100 operations of a transformers forward pass can wait for
it (up to the interpreter's switch interval, 5 ms), so engine and rollout slow each other down on
a small machine. A TorchScript function runs the whole pass in C++ without the GIL: one hand-off
per forward, and the model computes on one core while the event loop runs on the other.

What: the transformers computation, operation for operation (RMSNorm in float32, rotary
embeddings, grouped-query SDPA, SiLU-gated MLP, residual adds, final norm and LM head on the last
position), reading the model's own parameter tensors, so a weight update (``load_state_dict``
copies in place) is seen at once. Results equal the transformers forward up to float rounding.
Keys and values are read from and written to the slot buffer of :mod:`rockroll.agentrl.engines.kv`
(``[layers, 2, rows, kv_heads, columns, head_dim]``) like its ``buffer_cache``.

Which models: :func:`plan` accepts ``Qwen2ForCausalLM`` and ``LlamaForCausalLM`` with SiLU, full
attention in every layer, a rotary embedding whose frequencies do not depend on the sequence
(not ``dynamic``/``longrope``) and no tensor-parallel slicing; for any other model (or a torch
without TorchScript, which torch marks deprecated) it returns None and the engine calls the
transformers forward.
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["plan", "FastDecoder"]

# aten.linear, not torch.nn.functional.linear: DeepSpeed's ZeRO-3 replaces the latter process-wide with a Python
# wrapper TorchScript cannot compile (a trainer with that strategy beside an HF engine lost this path)
_SOURCE = """
def rms(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    dtype = x.dtype
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dtype)

def rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

def forward(
    ids: Tensor, pos: Tensor, mask: Tensor, kv: Tensor, lo: int, hi: int, start: int, write: int,
    embed: Tensor, inv_freq: Tensor, rope_scale: float,
    norms: List[Tensor], weights: List[Tensor], biases: List[Optional[Tensor]],
    final_norm: Tensor, head: Tensor, head_bias: Optional[Tensor],
    heads: int, kv_heads: int, head_dim: int, scaling: float, eps: float,
) -> Tensor:
    b = ids.shape[0]
    s = ids.shape[1]
    h = torch.nn.functional.embedding(ids, embed)
    freqs = pos[:, :, None].to(torch.float32) * inv_freq.to(torch.float32)[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = (emb.cos() * rope_scale).to(h.dtype)[:, None]
    sin = (emb.sin() * rope_scale).to(h.dtype)[:, None]
    stop = write + s
    for i in range(len(norms) // 2):
        w = 7 * i
        x = rms(h, norms[2 * i], eps)
        q = torch.ops.aten.linear(x, weights[w], biases[w]).view(b, s, heads, head_dim).transpose(1, 2)
        k = torch.ops.aten.linear(x, weights[w + 1], biases[w + 1]).view(b, s, kv_heads, head_dim).transpose(1, 2)
        v = torch.ops.aten.linear(x, weights[w + 2], biases[w + 2]).view(b, s, kv_heads, head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        kv[i, 0, lo:hi, :, write:stop].copy_(k)
        kv[i, 1, lo:hi, :, write:stop].copy_(v)
        o = torch.nn.functional.scaled_dot_product_attention(
            q, kv[i, 0, lo:hi, :, start:stop], kv[i, 1, lo:hi, :, start:stop], attn_mask=mask, scale=scaling,
            enable_gqa=kv_heads != heads,
        )
        o = o.transpose(1, 2).reshape(b, s, heads * head_dim)
        h = h + torch.ops.aten.linear(o, weights[w + 3], biases[w + 3])
        x = rms(h, norms[2 * i + 1], eps)
        gate = torch.nn.functional.silu(torch.ops.aten.linear(x, weights[w + 4], biases[w + 4]))
        up = torch.ops.aten.linear(x, weights[w + 5], biases[w + 5])
        h = h + torch.ops.aten.linear(gate * up, weights[w + 6], biases[w + 6])
    return torch.ops.aten.linear(rms(h[:, -1], final_norm, eps), head, head_bias)
"""

_COMPILED: Any = None


class FastDecoder:
    """The TorchScript forward bound to one model's parameters (build it with :func:`plan`)."""

    def __init__(self, model: Any) -> None:
        global _COMPILED
        import torch

        if _COMPILED is None:
            with warnings.catch_warnings():  # torch marks TorchScript deprecated; it still compiles and runs
                warnings.simplefilter("ignore", DeprecationWarning)
                _COMPILED = torch.jit.CompilationUnit(_SOURCE).forward
        inner = model.model
        attn = inner.layers[0].self_attn
        self.norms: list[Any] = []
        self.weights: list[Any] = []
        self.biases: list[Any] = []
        for layer in inner.layers:
            a, mlp = layer.self_attn, layer.mlp
            self.norms += [layer.input_layernorm.weight, layer.post_attention_layernorm.weight]
            for lin in (a.q_proj, a.k_proj, a.v_proj, a.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj):
                self.weights.append(lin.weight)
                self.biases.append(lin.bias)
        self.embed = inner.embed_tokens.weight
        self.final_norm = inner.norm.weight
        self.head, self.head_bias = model.lm_head.weight, model.lm_head.bias
        self.rotary = inner.rotary_emb
        self.heads = int(model.config.num_attention_heads)
        self.kv_heads = int(model.config.num_key_value_heads)
        self.head_dim = int(attn.head_dim)
        self.scaling = float(attn.scaling)
        self.eps = float(inner.norm.variance_epsilon)

    def __call__(self, ids: Any, pos: Any, mask: Any, kv: Any, rows: tuple[int, int], start: int, write: int) -> Any:
        """Logits ``[B, vocab]`` of the last position; writes the new tokens' KV to ``kv`` columns
        ``[write, write + S)`` of rows ``rows`` and attends over columns ``[start, write + S)``
        (``mask``: booleans ``[B, 1, S, write + S - start]``, True = attend)."""
        return _COMPILED(
            ids, pos, mask, kv, rows[0], rows[1], start, write,
            self.embed, self.rotary.inv_freq, float(self.rotary.attention_scaling),
            self.norms, self.weights, self.biases, self.final_norm, self.head, self.head_bias,
            self.heads, self.kv_heads, self.head_dim, self.scaling, self.eps,
        )  # fmt: skip


def plan(model: Any) -> FastDecoder | None:
    """A :class:`FastDecoder` for ``model`` when it is a supported Llama-style decoder, else None."""
    if type(model).__name__ not in ("Qwen2ForCausalLM", "LlamaForCausalLM"):
        return None
    cfg = model.config
    inner = getattr(model, "model", None)
    rotary = getattr(inner, "rotary_emb", None)
    rope_type = str(getattr(rotary, "rope_type", "default"))
    layer_types = set(getattr(cfg, "layer_types", None) or ["full_attention"])
    if (
        getattr(cfg, "hidden_act", None) != "silu"
        or layer_types != {"full_attention"}
        or getattr(cfg, "use_sliding_window", False)
        or getattr(cfg, "pretraining_tp", 1) != 1
        or rotary is None
        or "dynamic" in rope_type
        or "longrope" in rope_type
        or getattr(cfg, "_attn_implementation", None) not in ("sdpa", "eager")
    ):
        return None
    try:
        return FastDecoder(model)
    except Exception:  # noqa: BLE001 - an unexpected layout, or no TorchScript: transformers serves it
        return None
