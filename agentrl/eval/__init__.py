"""Evaluation: ``rockroll eval`` and eval jobs (``run``) and their typed config (``config``).

This package was the ``run`` module, so it re-exports that module's names; they load on first use, so
``import rockroll.agentrl.eval.config`` (what the model server reads) does not import the rollout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rockroll.agentrl._lazy import lazy_exports

if TYPE_CHECKING:
    from rockroll.agentrl.eval.run import (
        EvalReport,
        build_engine,
        episode_record,
        evaluate,
        open_source,
        run_eval,
        run_eval_job,
        summarize,
        summary_of,
    )

__all__ = [
    "EvalReport",
    "run_eval",
    "run_eval_job",
    "evaluate",
    "build_engine",
    "open_source",
    "summarize",
    "summary_of",
    "episode_record",
]

#: name -> the module that defines it, imported the first time the name is asked for
_LAZY = {
    "EvalReport": "rockroll.agentrl.eval.run",
    "run_eval": "rockroll.agentrl.eval.run",
    "run_eval_job": "rockroll.agentrl.eval.run",
    "evaluate": "rockroll.agentrl.eval.run",
    "build_engine": "rockroll.agentrl.eval.run",
    "open_source": "rockroll.agentrl.eval.run",
    "summarize": "rockroll.agentrl.eval.run",
    "summary_of": "rockroll.agentrl.eval.run",
    "episode_record": "rockroll.agentrl.eval.run",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
