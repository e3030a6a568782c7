"""Train and eval jobs: the runner, configs, worker processes, their logs, paths and identity."""

__all__: list[str] = []
