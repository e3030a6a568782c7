"""Agentic rollout: LLM engines, multi-turn env managers, env groups, async rollout, eval and serving.

Subpackages by role, top to bottom (each imports only those below it: pyproject.toml's import-linter contract):

* ``serving``: the OpenAI-compatible model server (``rockroll serve-model``);
* ``eval``: ``rockroll eval`` and eval jobs, and their config;
* ``rollout``: the episode loop: env managers, lock-step turns, the scheduler, hedging, async rollout, config;
* ``sources`` (where envs come from: local, sandbox, remote, OpenEnv) | ``rewards`` (reward functions, the pool);
* ``engines``: LLM engines (HF, vLLM, SGLang, OpenAI, random);
* ``models`` (tokenizers, chat prompts, the tiny model) | ``faults`` (fault-injection envs, latencies);
* ``errors`` (the error model) | ``trajectory`` (the contract with ``rockroll.trainer``).

The old flat module paths (``env_source``, ``tiny``, ``serve``, ...) still import, with a DeprecationWarning,
until 0.3 (:mod:`rockroll.agentrl._moved`).
"""

if __name__ != "rockroll.agentrl":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.agentrl, not {__name__}: rockroll's packages live in the rockroll namespace")

from rockroll.agentrl import _moved

_moved.install()

__all__: list[str] = []
