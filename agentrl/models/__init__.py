"""Tokenizers, chat prompts and the tiny local model: what turns messages into token ids.

``chat`` (prompt building, turn after turn), ``char_tokenizer`` (a character tokenizer for runs without a
model), ``memo_tokenizer`` (memoised rendering and encoding), ``tiny`` (a tiny causal LM and tokenizer
built locally; torch and transformers load inside its functions).

The names below load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rockroll.agentrl._lazy import lazy_exports

if TYPE_CHECKING:
    from rockroll.agentrl.models.char_tokenizer import CharTokenizer
    from rockroll.agentrl.models.chat import (
        ContextExceeded,
        HistoryMode,
        ObservationFormat,
        PromptBuilder,
        format_observation,
    )
    from rockroll.agentrl.models.memo_tokenizer import MemoTokenizer
    from rockroll.agentrl.models.tiny import build_tiny_model, load_model_and_tokenizer, load_tokenizer

__all__ = [
    "PromptBuilder",
    "ContextExceeded",
    "HistoryMode",
    "ObservationFormat",
    "format_observation",
    "CharTokenizer",
    "MemoTokenizer",
    "build_tiny_model",
    "load_model_and_tokenizer",
    "load_tokenizer",
]

#: name -> the module that defines it, imported the first time the name is asked for
_LAZY = {
    "PromptBuilder": "rockroll.agentrl.models.chat",
    "ContextExceeded": "rockroll.agentrl.models.chat",
    "HistoryMode": "rockroll.agentrl.models.chat",
    "ObservationFormat": "rockroll.agentrl.models.chat",
    "format_observation": "rockroll.agentrl.models.chat",
    "CharTokenizer": "rockroll.agentrl.models.char_tokenizer",
    "MemoTokenizer": "rockroll.agentrl.models.memo_tokenizer",
    "build_tiny_model": "rockroll.agentrl.models.tiny",
    "load_model_and_tokenizer": "rockroll.agentrl.models.tiny",
    "load_tokenizer": "rockroll.agentrl.models.tiny",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
