"""Model building for the trainer: policy, frozen reference, and a critic (LM backbone + value head)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model, load_model_and_tokenizer

if TYPE_CHECKING:
    import torch

    from rockroll.trainer.config import ModelConfig

__all__ = ["ensure_model", "load_policy", "frozen_copy", "Critic", "resolve_device"]


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def ensure_model(cfg: ModelConfig) -> Path:
    """The model directory; a tiny local model is built there first when asked and missing."""
    path = Path(cfg.path)
    if (path / "config.json").is_file():
        return path
    if not cfg.build_tiny:
        raise FileNotFoundError(f"no model at {path}; set model.path to a HF model directory or model.build_tiny: true")
    shape = TinyModelConfig(
        hidden_size=cfg.tiny_hidden_size,
        num_layers=cfg.tiny_layers,
        vocab_size=cfg.tiny_vocab_size,
        env_ids=tuple(cfg.tiny_envs),
        answer_tokens=cfg.tiny_answer_tokens,
        chat_template=cfg.tiny_chat_template,
        tokenizer=cfg.tiny_tokenizer,
        copy_steps=cfg.tiny_copy_steps,
    )
    return build_tiny_model(path, shape)


def load_policy(cfg: ModelConfig) -> tuple[Any, Any]:
    """``(model, tokenizer)`` in train mode on the configured device and dtype."""
    path = ensure_model(cfg)
    model, tok = load_model_and_tokenizer(path, device=resolve_device(cfg.device), dtype=cfg.dtype)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    return model, tok


def frozen_copy(model: Any) -> Any:
    """A deep copy with gradients off, in eval mode (reference policy, rollout engine weights)."""
    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def _critic_class() -> type:
    import torch

    class _Critic(torch.nn.Module):
        """A value model: the policy's transformer body (copied) and a linear head on the last hidden state."""

        def __init__(self, policy: Any) -> None:
            super().__init__()
            body = copy.deepcopy(policy)
            self.body = body.model if hasattr(body, "model") else body
            hidden = self.body.config.hidden_size
            self.head = torch.nn.Linear(hidden, 1)
            torch.nn.init.zeros_(self.head.weight)
            torch.nn.init.zeros_(self.head.bias)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            h = self.body(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
            return self.head(h.float()).squeeze(-1)

    return _Critic


def Critic(policy: Any) -> Any:  # noqa: N802 - reads as a class
    """Build a critic from ``policy`` (see ``_Critic``)."""
    return _critic_class()(policy)
