"""Lookup (``Lookup-v0``): a tool env; answer a multi-hop question about a small generated database."""

from rockroll.envs.lookup.env import TOOLS, LookupEnv
from rockroll.envs.lookup.world import MAX_HOPS, QUESTIONS, World, generate_world

__all__ = ["MAX_HOPS", "QUESTIONS", "TOOLS", "LookupEnv", "World", "generate_world"]
