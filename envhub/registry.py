"""EnvSpec, register, make, spec, list_envs: the registry of rockroll environments.

Ids are versioned (``Sokoban-v0``); ``make("Sokoban")`` takes the newest version of that name in the
same namespace. A custom env of an API owner lives in the owner's namespace (``alice/Maze-v0``); a
bare name never reaches into a namespace, and ``rockroll/`` names the built-in one. Entry points
are lazy ``"module:Class"`` strings (or callables), imported on first ``make``; so is a spec's
``expert`` (``"module:factory"``, see :mod:`rockroll.envs.experts`). ``make`` attaches the spec
to the env it builds (``env.unwrapped.env_spec``). Every env without a namespace is also registered
with gymnasium as ``rockroll/<id>`` (gymnasium's ids cannot nest a second namespace, so namespaced
custom envs live in this registry only).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from rockroll.envhub.errors import RegistrationError, UnknownEnvError
from rockroll.envs.carry import forget_registration, note_registration
from rockroll.envs.errors import EnvConfigError
from rockroll.envs.experts import ExpertFactory
from rockroll.envs.registries import import_target
from rockroll.envs.wrappers import MaxSteps

__all__ = [
    "EnvSpec",
    "register",
    "make",
    "spec",
    "list_envs",
    "deregister",
    "parse_env_id",
    "split_env_id",
    "GYM_NAMESPACE",
]

GYM_NAMESPACE = "rockroll"
_ID_RE = re.compile(
    r"^(?:(?P<namespace>(?!\.\.?/)[A-Za-z0-9_.\-]{1,128})/)?(?P<name>[A-Za-z][A-Za-z0-9_.]*)(?:-v(?P<version>\d+))?$"
)


@dataclass(frozen=True)
class EnvSpec:
    """Everything needed to build an env.

    Attributes:
        id: versioned id, ``Name-vN``.
        entry_point: ``"module:Class"`` or a callable returning a :class:`~rockroll.envs.core.TextEnv`.
        kwargs: default constructor kwargs (overridden by those given to ``make``).
        max_steps: default step limit applied by :class:`~rockroll.envs.wrappers.MaxSteps` (None: none).
        description: one line for listings.
        tags: free-form labels (``"grid"``, ``"custom"``...).
        supports_fork: whether ``get_state``/``set_state`` round-trip mid-episode.
        expert: ``"module:factory"`` (or a callable) of the env's privileged solver:
            ``factory(env) -> (() -> next action | None)``, see :mod:`rockroll.envs.experts`; None: none.
        parses_answer: whether the env reads the agent's text through
            :func:`~rockroll.envs.core.parse_answer` (every :class:`~rockroll.envs.core.TextEnv`, so every
            built-in env): players such as ``rockroll play`` then wrap a bare action in
            ``<answer>...</answer>``. False for a plain gymnasium env that takes the action text as is.
        action_set: the answers (without ``<answer>`` tags) the env takes in every state, when that set is
            fixed and small (FrozenLake's four moves); empty: not declared. A multi-turn rollout then samples
            only these answers (``rollout.episode.restrict_answers``, :mod:`rockroll.agentrl.engines.choices`).
    """

    id: str
    entry_point: str | Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_steps: int | None = None
    description: str = ""
    tags: tuple[str, ...] = ()
    supports_fork: bool = True
    expert: str | ExpertFactory | None = None
    parses_answer: bool = True
    action_set: tuple[str, ...] = ()

    def format_action(self, action: str) -> str:
        """``action`` as this env expects it: in ``<answer>`` tags when it parses answers and has none."""
        if not self.parses_answer or "<answer>" in action.lower():
            return action
        return f"<answer>{action}</answer>"

    @property
    def name(self) -> str:
        return parse_env_id(self.id)[0]

    @property
    def version(self) -> int:
        return parse_env_id(self.id)[1] or 0

    def load(self) -> Callable[..., Any]:
        """Import and return the entry point."""
        return _resolve(self.id, "entry point", self.entry_point)

    def load_expert(self) -> ExpertFactory | None:
        """Import and return the expert factory (None when the env has no expert)."""
        return None if self.expert is None else _resolve(self.id, "expert", self.expert)


def _resolve(env_id: str, what: str, target: str | Callable[..., Any]) -> Callable[..., Any]:
    """``target`` itself when callable, else the object its ``"module:attr"`` names (or ``RegistrationError``)."""
    if callable(target):
        return target
    try:
        return import_target(target)
    except (ImportError, AttributeError) as e:
        raise RegistrationError(f"{env_id}: cannot load {what} {target!r}: {e}") from e


_REGISTRY: dict[str, EnvSpec] = {}


def split_env_id(env_id: str) -> tuple[str | None, str, int | None]:
    """Split ``[namespace/]Name[-vN]`` into ``(namespace, Name, N)``.

    ``namespace`` is None for a bare id and for ``rockroll/`` (the built-in envs' namespace); ``N`` is
    None when no version is given.
    """
    if not isinstance(env_id, str):
        raise RegistrationError(f"env id must be a str, got {type(env_id).__name__}")
    m = _ID_RE.match(env_id)
    if not m:
        raise RegistrationError(
            f"malformed env id {env_id!r}: expected 'Name-vN' or 'owner/Name-vN', e.g. 'Sokoban-v0'"
        )
    namespace, version = m.group("namespace"), m.group("version")
    return (
        None if namespace == GYM_NAMESPACE else namespace,
        m.group("name"),
        None if version is None else int(version),
    )


def parse_env_id(env_id: str) -> tuple[str, int | None]:
    """Split ``[namespace/]Name-vN`` into ``(name, N)``: ``name`` keeps a namespace other than ``rockroll/``.

    ``N`` is None when no version is given.
    """
    namespace, name, version = split_env_id(env_id)
    return (name if namespace is None else f"{namespace}/{name}"), version


def register(
    id: str,
    entry_point: str | Callable[..., Any],
    *,
    kwargs: dict[str, Any] | None = None,
    max_steps: int | None = None,
    description: str = "",
    tags: tuple[str, ...] | list[str] = (),
    supports_fork: bool = True,
    expert: str | ExpertFactory | None = None,
    parses_answer: bool = True,
    action_set: tuple[str, ...] | list[str] = (),
    override: bool = False,
) -> EnvSpec:
    """Register an env; raises :class:`RegistrationError` on a bad id or a duplicate.

    ``expert`` names the env's solver, ``"module:factory"`` imported on first use (see
    :mod:`rockroll.envs.experts`); ``expert_for(env)`` then works on envs that ``make`` builds.
    ``parses_answer=False`` registers an env that takes bare actions (no ``<answer>`` tags).
    """
    name, version = parse_env_id(id)
    if version is None:
        raise RegistrationError(f"env id {id!r} needs a version suffix, e.g. '{name}-v0'")
    if isinstance(entry_point, str) and not re.match(r"^[\w.]+:[\w.]+$", entry_point):
        raise RegistrationError(f"{id}: entry point must be 'module:Class', got {entry_point!r}")
    if isinstance(expert, str) and not re.match(r"^[\w.]+:[\w.]+$", expert):
        raise RegistrationError(f"{id}: expert must be 'module:factory', got {expert!r}")
    if expert is not None and not isinstance(expert, str) and not callable(expert):
        raise RegistrationError(f"{id}: expert must be 'module:factory', a callable or None, got {expert!r}")
    if id in _REGISTRY and not override:
        raise RegistrationError(f"{id} is already registered (pass override=True to replace it)")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise RegistrationError(f"{id}: max_steps must be a positive int or None, got {max_steps!r}")
    env_spec = EnvSpec(
        id=id,
        entry_point=entry_point,
        kwargs=dict(kwargs or {}),
        max_steps=max_steps,
        description=description,
        tags=tuple(tags),
        supports_fork=supports_fork,
        expert=expert,
        parses_answer=bool(parses_answer),
        action_set=tuple(str(a) for a in action_set),
    )
    _REGISTRY[id] = env_spec
    _register_with_gymnasium(env_spec)
    replay = functools.partial(register, id, entry_point, kwargs=env_spec.kwargs, max_steps=max_steps,
                               description=description, tags=env_spec.tags, supports_fork=supports_fork,
                               expert=expert, parses_answer=env_spec.parses_answer, override=True)  # fmt: skip
    note_registration("env", id, replay)  # carried into Ray workers (rockroll.envs.carry)
    return env_spec


def deregister(env_id: str) -> None:
    """Remove an env from the registry (and from gymnasium's)."""
    env_spec = spec(env_id)
    del _REGISTRY[env_spec.id]
    forget_registration("env", env_spec.id)
    gym.registry.pop(f"{GYM_NAMESPACE}/{env_spec.id}", None)


def spec(env_id: str) -> EnvSpec:
    """The spec of ``env_id`` (newest version of that name in the same namespace when none is given).

    A bare name never resolves to a namespaced (custom) env; suggestions only suggest.
    """
    name, version = parse_env_id(env_id)
    if version is not None:
        found = _REGISTRY.get(f"{name}-v{version}")
    else:
        versions = [s for s in _REGISTRY.values() if s.name == name]
        found = max(versions, key=lambda s: s.version) if versions else None
    if found is None:
        raise UnknownEnvError(env_id, difflib.get_close_matches(env_id, list(_REGISTRY), n=3, cutoff=0.5))
    return found


def list_envs(tag: str | None = None) -> list[EnvSpec]:
    """Registered specs sorted by id, optionally only those with ``tag``."""
    return [s for _, s in sorted(_REGISTRY.items()) if tag is None or tag in s.tags]


def make(env_id: str, **kwargs: Any) -> MaxSteps:
    """Build ``env_id`` with its spec's kwargs overridden by ``kwargs``.

    ``max_steps`` (spec default unless given) goes to the :class:`MaxSteps` wrapper; the rest to
    the env's constructor. Unknown or invalid kwargs raise :class:`~rockroll.envs.errors.EnvConfigError`.
    The env's gymnasium ``spec`` (``env.spec``) names it ``rockroll/<id>``, with ``max_episode_steps``
    the step limit of its :class:`MaxSteps`.
    """
    env_spec = spec(env_id)
    max_steps = kwargs.pop("max_steps", env_spec.max_steps)
    ctor = env_spec.load()
    merged = {**env_spec.kwargs, **kwargs}
    _check_kwargs(env_spec.id, ctor, merged)
    env = ctor(**merged)
    env.spec_id = env_spec.id
    env.env_spec = env_spec  # lets rockroll.envs.experts find the expert without importing envhub
    wrapped = MaxSteps(env, max_steps)  # checks max_steps before the spec below names it
    # gymnasium.make replaces it with its own; MaxSteps.spec adds the limit to either. A wrapper's spec is
    # read-only (the wrapped env's, which a nested make has named already).
    if isinstance(env, gym.Env) and not isinstance(env, gym.Wrapper) and "/" not in env_spec.id:
        env.spec = gym.envs.registration.EnvSpec(
            id=f"{GYM_NAMESPACE}/{env_spec.id}",
            entry_point=_gym_entry_point(env_spec.id),
            kwargs={**merged, "max_steps": max_steps},
            order_enforce=False,
            disable_env_checker=True,
        )
    return wrapped


def _check_kwargs(env_id: str, ctor: Callable[..., object], kwargs: dict[str, object]) -> None:
    try:
        accepted = _accepted_kwargs(ctor)
    except TypeError:  # an unhashable callable: not cached
        accepted = _accepted_kwargs.__wrapped__(ctor)
    if accepted is None:
        return
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise EnvConfigError(
            f"{env_id} got unknown argument(s) {', '.join(unknown)}; accepted: {', '.join([*accepted, 'max_steps'])}",
            env=env_id,
            param=unknown[0],
        )


@functools.lru_cache(maxsize=512)
def _accepted_kwargs(ctor: Callable[..., object]) -> tuple[str, ...] | None:
    """The keyword arguments ``ctor`` takes (None: any, or its signature cannot be read); cached, as every
    episode of a rollout makes an env."""
    try:
        params = inspect.signature(ctor).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return tuple(n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


def _register_with_gymnasium(env_spec: EnvSpec) -> None:
    if "/" in env_spec.id:  # a namespaced custom env: gymnasium's ids have room for one namespace only
        return
    gym_id = f"{GYM_NAMESPACE}/{env_spec.id}"
    gym.registry.pop(gym_id, None)
    gym.register(
        id=gym_id,
        entry_point=_gym_entry_point(env_spec.id),
        disable_env_checker=True,
        order_enforce=False,
    )


def _gym_entry_point(env_id: str) -> Callable[..., MaxSteps]:
    def build(**kwargs: object) -> MaxSteps:
        kwargs.pop("render_mode", None)
        return make(env_id, **kwargs)

    return build
