"""ALFWorld-style household tasks (``ALFWorld-v0``) on procedurally generated homes.

* :class:`ALFWorldEnv`: the text env (ALFWorld's command grammar and feedback wording).
* :func:`plan` / :func:`next_command`: a privileged planner that solves every generated task.
* :class:`~rockroll.envs.alfworld.original.ALFWorldOriginalEnv` (import ``rockroll.envs.alfworld.original``;
  ``rockroll.envhub.builtin.register_alfworld_original()`` registers it as ``ALFWorldOriginal-v0``): the
  same contract over the original ``alfworld`` package and its data, when they are installed.
"""

from rockroll.envs.alfworld.catalog import TASK_ALIASES, TASK_TYPES
from rockroll.envs.alfworld.env import ALFWorldEnv
from rockroll.envs.alfworld.generator import GenConfig, generate
from rockroll.envs.alfworld.planner import next_action, next_command, plan
from rockroll.envs.alfworld.tasks import goal_satisfied
from rockroll.envs.alfworld.world import World

__all__ = [
    "ALFWorldEnv",
    "GenConfig",
    "TASK_ALIASES",
    "TASK_TYPES",
    "World",
    "generate",
    "goal_satisfied",
    "next_action",
    "next_command",
    "plan",
]
