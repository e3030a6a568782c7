"""The OpenAI-compatible model server (``rockroll serve-model``).

``app`` (the FastAPI app and :func:`serve_model`), ``service`` (request handling), ``protocol`` (the wire
format), ``decode`` (tokens to one choice), ``episode`` (a trained policy's episode settings), ``tool_calls``
(tools into the prompt, the model's calls out as OpenAI ``tool_calls``), ``guard`` (API key, body limit,
clients that left).

The names below load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rockroll.agentrl._lazy import lazy_exports

if TYPE_CHECKING:
    from rockroll.agentrl.serving.app import create_app, serve_model
    from rockroll.agentrl.serving.service import ModelService

__all__ = [
    "create_app",
    "serve_model",
    "ModelService",
]

#: name -> the module that defines it, imported the first time the name is asked for
_LAZY = {
    "create_app": "rockroll.agentrl.serving.app",
    "serve_model": "rockroll.agentrl.serving.app",
    "ModelService": "rockroll.agentrl.serving.service",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
