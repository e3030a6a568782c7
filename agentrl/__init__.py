"""Agentic rollout: LLM engines, multi-turn env managers, env groups, async rollout."""

if __name__ != "rockroll.agentrl":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.agentrl, not {__name__}: rockroll's packages live in the rockroll namespace")

__all__: list[str] = []
