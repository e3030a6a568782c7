"""Agentic rollout: LLM engines, multi-turn env managers, env groups, async rollout."""

__all__: list[str] = []
