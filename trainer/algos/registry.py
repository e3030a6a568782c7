"""Kept for old imports: :class:`Registry` and :class:`UnknownNameError` live in :mod:`rockroll.envs.registries`.

They moved to the lowest layer so that every layer's registries (engines, env sources, SWE
executors, sandbox backends, and the policy losses and advantage estimators here) share one
implementation and one error. Import them from ``rockroll.envs`` (or ``rockroll.trainer.algos``).
"""

from rockroll.envs.registries import Registry, UnknownNameError

__all__ = ["Registry", "UnknownNameError"]
