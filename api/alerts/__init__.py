"""Proactive alerts: rules over what the platform measures, fired and resolved, sent to a webhook, the log and /ui."""

__all__: list[str] = []
