"""The trainer's rollout side: the one boundary the training loop sees (:class:`base.Rollout`), its two
implementations (multi-turn through agentrl's scheduler, plan mode), the rollout config, the engine and its sync."""
