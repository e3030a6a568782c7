"""Expert (privileged) policies: solvers that read an env's state.

They make demonstrations for warm starts, baselines for benchmarks and the scripted demo. An env's
expert is named on its spec, like its entry point and as lazily::

    rockroll.envhub.register("Maze-v0", "my_pkg.maze:MazeEnv", expert="my_pkg.maze_expert:expert")

The factory is called with the env (wrapped or not) after ``reset`` and returns a zero-argument
callable giving the next action text (without ``<answer>`` tags), or None when it has no move::

    def expert(env) -> Callable[[], str | None]

Experts that keep state through an episode (WebShop, SWE) set it up in the factory, so call
:func:`expert_for` after each reset; stateless ones wrap a ``next_action(env)`` function (see
:mod:`rockroll.envs.frozenlake.expert`).

``envhub.make`` attaches the spec to the env it builds (``env_spec``), so :func:`expert_for`
finds the expert without this layer importing envhub; an env built by hand has no spec and so no
expert.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rockroll.envs.registries import import_target

__all__ = ["Expert", "ExpertFactory", "expert_factory", "expert_for", "has_expert", "load_expert_factory"]

#: the next action for the env's current state (None: no move)
Expert = Callable[[], "str | None"]
#: called with the env after ``reset``; returns its :data:`Expert`
ExpertFactory = Callable[[Any], Expert]


def _spec_of(env: Any) -> Any:
    """The spec ``envhub.make`` attached (on the env or, through wrappers, the unwrapped env)."""
    found = getattr(env, "env_spec", None)
    return found if found is not None else getattr(getattr(env, "unwrapped", env), "env_spec", None)


def has_expert(env: Any) -> bool:
    """Whether ``env``'s spec names an expert (nothing is imported)."""
    return getattr(_spec_of(env), "expert", None) is not None


def expert_factory(env: Any) -> ExpertFactory:
    """The expert factory of ``env``'s spec, imported now; ``LookupError`` when it has none."""
    spec = _spec_of(env)
    if spec is None:
        name = type(getattr(env, "unwrapped", env)).__name__
        raise LookupError(
            f"no expert policy for {name}: it was not built by rockroll.envhub.make, so it has no spec naming one"
        )
    if getattr(spec, "expert", None) is None:
        raise LookupError(
            f"no expert policy for {spec.id}: its spec names none "
            "(register the env with expert='module:factory' to give it one)"
        )
    return spec.load_expert()


def load_expert_factory(target: str) -> ExpertFactory:
    """The expert factory ``"module:attr"`` names (another demonstrator than the spec's); ``LookupError`` naming
    what is missing when it cannot be loaded."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise LookupError(f"an expert is named 'module:factory', got {target!r}")
    try:
        found = import_target(target)
    except ImportError as e:
        raise LookupError(f"cannot load expert {target!r}: {e}") from e
    except AttributeError:
        found = None
    if not callable(found):
        raise LookupError(f"cannot load expert {target!r}: {module_name} has no callable {attr!r}")
    return found


def expert_for(env: Any, factory: str | None = None) -> Expert:
    """A zero-argument callable giving the expert's next action for ``env``'s current state.

    ``factory``: ``"module:attr"`` of another expert factory than the one the env's spec names.
    Call it after ``reset``: stateful experts start their episode here.
    """
    return (load_expert_factory(factory) if factory else expert_factory(env))(env)
