"""What the strategies and the Ray workers share: the optional deepspeed check and a free local port.

Its own module so :mod:`rockroll.trainer.strategies.deepspeed` and :mod:`rockroll.trainer.learner.ray_workers`
need neither the strategies package's :func:`~rockroll.trainer.strategies.make_trainer` nor each other.
"""

from __future__ import annotations

import socket
from typing import Any

__all__ = ["DEEPSPEED_MISSING", "require_deepspeed", "free_port"]

DEEPSPEED_MISSING = (
    "workers.strategy 'deepspeed' needs deepspeed, which is not installed: "
    "pip install 'rockroll[gpu]' (or pip install deepspeed); or set workers.strategy: torch"
)


def require_deepspeed() -> Any:
    """Import and return ``deepspeed``; raise ``RuntimeError`` saying how to install it when missing."""
    try:
        import deepspeed
    except ImportError as e:
        raise RuntimeError(DEEPSPEED_MISSING) from e
    return deepspeed


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a torch.distributed rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
