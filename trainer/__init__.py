"""Training: the GRPO/PPO family on Ray workers with torch."""

__all__: list[str] = []
