"""Expert (privileged) policies: solvers that read an env's state.

They make demonstrations for warm starts, baselines for benchmarks and the scripted demo. An env's
expert is named on its spec, like its entry point and as lazily::

    rockroll.envhub.register("Maze-v0", "my_pkg.maze:MazeEnv", expert="my_pkg.maze_expert:expert")

The factory is called with the env (wrapped or not) after ``reset`` and returns a zero-argument
callable giving the next action, or None when it has no move::

    def expert(env) -> Callable[[], str | ToolAction | None]

A text env's expert gives the action text (without ``<answer>`` tags: the caller wraps it as the env's
spec says). A tool env's expert (:class:`rockroll.envs.tool_env.ToolEnv`, e.g.
:mod:`rockroll.envs.lookup.expert`) gives a :class:`~rockroll.envs.tools.ToolAction`, the turn's text and
its calls, which goes to ``env.step`` as it is; where a model's text is needed (the warm start's demos) it
is rendered in the model's tool-call format. A tool env's expert may also give text: a turn without a call.

Experts that keep state through an episode (WebShop, SWE) set it up in the factory, so call
:func:`expert_for` after each reset; stateless ones wrap a ``next_action(env)`` function (see
:mod:`rockroll.envs.frozenlake.expert`).

``envhub.make`` attaches the spec to the env it builds (``env_spec``), so :func:`expert_for`
finds the expert without this layer importing envhub; an env built by hand has no spec and so no
expert.

Another demonstrator than the spec's (``rollout.expert`` of a training config) is named, never
imported, when a config is checked: it must be a name of :data:`EXPERTS` (or the lazy
``"module:factory"`` text one was registered with), or the expert the env's spec declares
(:func:`is_known_expert`). So a job config sent to the control plane cannot make it import a module
(``this:s``, ``os:system``) or tell which modules exist; the factory loads only where the warm start
runs (:func:`load_expert_factory`, the job's confined worker). :func:`register_expert` adds one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar, runtime_checkable

from rockroll.envs.registries import Registry
from rockroll.envs.tools import ToolAction

__all__ = [
    "EXPERTS",
    "Expert",
    "ExpertFactory",
    "expert_factory",
    "expert_for",
    "has_expert",
    "is_known_expert",
    "load_expert_factory",
    "register_expert",
    "unwrapped_as",
]

E = TypeVar("E")

#: the next action for the env's current state: text, a tool-calling turn (tool envs), or None (no move)
Expert = Callable[[], str | ToolAction | None]
#: called with the env after ``reset``; returns its :data:`Expert`
ExpertFactory = Callable[[object], Expert]

#: demonstrators a config may name besides an env spec's own: name -> lazy ``"module:factory"`` (or a factory)
EXPERTS: Registry[ExpertFactory] = Registry("expert", "rollout.expert")
_TARGETS: dict[str, str] = {}  # the lazy "module:factory" text of each entry -> its name (older configs name that)


def register_expert(name: str, factory: str | ExpertFactory, *, override: bool = False) -> None:
    """Let configs name ``factory`` (a lazy ``"module:factory"``, imported on first use, or a callable) as ``name``
    (``rollout.expert: NAME``; a lazy entry's text works as a name too)."""
    EXPERTS.add(name, factory, override=override)
    if isinstance(factory, str):
        _TARGETS[factory] = name


def is_known_expert(target: str, declared: object = None) -> bool:
    """Whether ``target`` names a registered expert (by name or by its lazy text), or is ``declared`` (the expert
    an env's spec names). Compares text only: nothing is imported."""
    return bool(target) and (target in EXPERTS or target in _TARGETS or target == declared)


register_expert("alfworld_searcher", "rockroll.envs.alfworld.searcher:expert")


@runtime_checkable
class _Spec(Protocol):
    """What this module reads of an env's spec (an :class:`rockroll.envhub.registry.EnvSpec`)."""

    id: str
    expert: object

    def load_expert(self) -> ExpertFactory | None: ...


def unwrapped_as(env: object, cls: type[E]) -> E:
    """The env inside ``env`` (its ``unwrapped``: through ``MaxSteps`` and gymnasium wrappers), which an expert
    of ``cls`` reads; ``TypeError`` when it is another env."""
    inner = getattr(env, "unwrapped", env)
    if not isinstance(inner, cls):
        raise TypeError(f"this expert plays {cls.__name__} envs, got {type(inner).__name__}")
    return inner


def _spec_of(env: object) -> _Spec | None:
    """The spec ``envhub.make`` attached (on the env or, through wrappers, the unwrapped env)."""
    found = getattr(env, "env_spec", None)
    spec = found if found is not None else getattr(getattr(env, "unwrapped", env), "env_spec", None)
    return spec if isinstance(spec, _Spec) else None


def has_expert(env: object) -> bool:
    """Whether ``env``'s spec names an expert (nothing is imported)."""
    return getattr(_spec_of(env), "expert", None) is not None


def expert_factory(env: object) -> ExpertFactory:
    """The expert factory of ``env``'s spec, imported now; ``LookupError`` when it has none."""
    spec = _spec_of(env)
    if spec is None:
        name = type(getattr(env, "unwrapped", env)).__name__
        raise LookupError(
            f"no expert policy for {name}: it was not built by rockroll.envhub.make, so it has no spec naming one"
        )
    factory = spec.load_expert() if spec.expert is not None else None
    if factory is None:
        raise LookupError(
            f"no expert policy for {spec.id}: its spec names none "
            "(register the env with expert='module:factory' to give it one)"
        )
    return factory


def load_expert_factory(target: str) -> ExpertFactory:
    """The registered expert ``target`` names (its name in :data:`EXPERTS`, or the lazy text it was registered
    with), imported now; an :class:`~rockroll.envs.registries.UnknownNameError` (a ``LookupError``) listing the
    registered ones otherwise. An unregistered ``"module:attr"`` is never imported."""
    found = EXPERTS.get(_TARGETS.get(target, target))
    if not callable(found):
        raise LookupError(f"expert {target!r} is registered as {found!r}, which is not callable")
    return found


def expert_for(env: object, factory: str | None = None) -> Expert:
    """A zero-argument callable giving the expert's next action for ``env``'s current state.

    ``factory``: another expert than the one the env's spec names, a name of :data:`EXPERTS` (the spec's
    own ``"module:attr"`` text means the spec's expert). Call it after ``reset``: stateful experts start
    their episode here.
    """
    if factory and factory == getattr(_spec_of(env), "expert", None):
        factory = None
    return (load_expert_factory(factory) if factory else expert_factory(env))(env)
