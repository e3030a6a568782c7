"""Env sessions hosted by the in-sandbox server.

A session is one env built with ``envhub.make``; its id is random. Calls on one session are
serialised by a per-session lock; different sessions run in parallel. ``fork`` builds a second env
with the same id and kwargs and copies the state over (``get_state``/``set_state``), so both
continue independently. Each session keeps the recent time of its steps and of its resets, so the
channel (:mod:`rockroll.sandbox.server.channel`) knows which calls are quick enough to run inline
(:meth:`SessionStore.quick`).

Custom envs: ``ROCKROLL_ENV_MODULES=pkg.a,pkg.b`` names modules that register envs with
``envhub.register``; a custom image only has to put them on ``PYTHONPATH``. The control plane's
custom envs come in this way through :mod:`rockroll.sandbox.server.plugins`.

Where is env code run? Agent isolation ``uid`` (:class:`rockroll.sandbox.server.agents.Agents`):

* envs the server's own registry knows run in the server process: rockroll's built-in envs and
  modules of ``ROCKROLL_ENV_MODULES`` inside the ``rockroll`` package (code that ships with the
  project and is as trusted as the server; per-step speed matters for them);
* every other id (uploaded plugins, modules outside ``rockroll``) is a custom env: the server
  never imports its code; each session runs in a worker process of its own
  (:class:`~rockroll.sandbox.server.worker_env.WorkerEnv`) as the session's agent uid with no
  capabilities, which imports the modules and hosts the env; the server forwards the calls as JSON.

Agent isolation ``none`` (the server cannot change uids): every module is imported here at
start-up and every env runs in this process, as before.

Agent identity: every call into an in-process env runs with that session's provider set
(:func:`rockroll.envs.agent_identity.using_agent`), so env code that runs agent commands (SWE-v0)
runs them as the session's own uid in its own folder; the uid is taken the first time the env asks
for it (a FrozenLake step never does: one context variable set per call, no process hop) and given
back, its processes killed and its folder wiped, when the session closes. A worker session takes
its uid when it starts; closing it kills the worker and every process of that uid.

Actions: ``env.step`` takes the agent's text or a turn with tool calls in its wire form
(:func:`rockroll.envs.tools.action_to_wire`), read back by :func:`rockroll.envs.action_wire.read_action` (a
malformed one: ``ActionTypeError`` naming its field); a session's open answer lists its env's tools (OpenAI
function schemas).

Threat model: env ids and kwargs come from the host (trusted); actions come from the agent and are
checked (text or ``{text, tool_calls}`` of capped size) before the env sees them. A limit caps the number
of sessions. Built-in env code runs in the server process with its capabilities: a bug in it is the server's bug. Custom env code is
untrusted: it runs as the agent, cannot reach the server's socket or files nor another session's
folder, and a worker that dies or hangs loses its own session only (``SessionLost``).
"""

from __future__ import annotations

import importlib
import os
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rockroll.envs.action_wire import read_action, tools_of, tools_to_wire
from rockroll.envs.agent_identity import AgentIdentity, using_agent
from rockroll.envs.errors import StateError
from rockroll.envs.json_types import JSONValue
from rockroll.sandbox.errors import CapacityError, SessionNotFound
from rockroll.sandbox.server.agents import Agents
from rockroll.sandbox.server.wire import OpenedSession
from rockroll.sandbox.server.worker_env import WorkerEnv

if TYPE_CHECKING:
    from rockroll.envs.wrappers import MaxSteps

    #: a session's env: one of the server's registry (in this process), or a custom env's worker
    Env = MaxSteps | WorkerEnv

__all__ = ["SessionStore", "trusted_module", "QUICK_S"]

QUICK_S = 0.002
_MAX_ACTION_CHARS = 16 * 1024 * 1024
"""A session whose recent steps and resets took less than this (seconds) is quick (:meth:`SessionStore.quick`)."""

#: modules of ``ROCKROLL_ENV_MODULES`` that load others' code: never imported by an isolated server
_LOADERS = frozenset({"rockroll.sandbox.server.plugins"})


PRELOAD_ENV = "ROCKROLL_PRELOAD_ENVS"
"""Set to ``1``, the server imports the env registry (gymnasium, numpy) in the background once it
answers, so a first session opens without that wait; unset, the first ``env.make`` imports it. The
warm pool sets it on its idle sandboxes (:mod:`rockroll.sandbox.warm`); a cold start leaves it off, so
a burst of starts does not spend its CPU on imports no session asked for yet."""


def _make(env_id: str, kwargs: dict[str, object]) -> MaxSteps:
    """``envhub.make`` through :mod:`rockroll.sandbox.server.env_registry`, imported on first use (it imports
    gymnasium and numpy)."""
    from rockroll.sandbox.server import env_registry

    return env_registry.make(env_id, **kwargs)


def _known(env_id: str) -> bool:
    from rockroll.sandbox.server import env_registry

    return env_registry.known(env_id)


def _import_registry() -> None:
    from rockroll.sandbox.server import env_registry  # noqa: F401 - imported for its side effect (the preload)


def trusted_module(name: str) -> bool:
    """Whether a module of ``ROCKROLL_ENV_MODULES`` ships with rockroll (imported by the server itself)."""
    return name.startswith("rockroll.") and name not in _LOADERS


def _float(x: object) -> float:
    """A reward as a float (a custom env's worker may answer anything: ``float()``'s own TypeError then)."""
    if isinstance(x, (int, float, str)):
        return float(x)
    raise TypeError(f"float() argument must be a string or a real number, not '{type(x).__name__}'")


def _state(state: JSONValue) -> dict[str, JSONValue]:
    """A snapshot as ``set_state`` takes it (an object; the env checks the rest)."""
    if not isinstance(state, dict):  # what the env's set_state says of it
        raise StateError(f"a snapshot is an object, got {type(state).__name__}")
    return state


class _Agent:
    """One session's agent identity, taken from :class:`Agents` the first time it is asked for."""

    def __init__(self, agents: Agents | None) -> None:
        self._agents = agents
        self._lock = threading.Lock()
        self.identity: AgentIdentity | None = None

    def __call__(self) -> AgentIdentity | None:
        if self._agents is None:
            return None
        with self._lock:
            if self.identity is None:
                self.identity = self._agents.acquire()
            return self.identity

    def release(self) -> None:
        with self._lock:
            ident, self.identity = self.identity, None
        if ident is not None and self._agents is not None:
            self._agents.release(ident)


@dataclass
class _Session:
    env_id: str
    kwargs: dict[str, object]
    env: Env
    agent: _Agent
    lock: threading.Lock = field(default_factory=threading.Lock)
    # the recent time (s) of its "env.step" and "env.reset" calls: up at once, down slowly; < 0: not known yet
    cost: dict[str, float] = field(default_factory=lambda: {"env.step": -1.0, "env.reset": -1.0})

    def timed(self, op: str, seconds: float) -> None:
        was = self.cost[op]
        self.cost[op] = seconds if seconds > was or was < 0 else 0.75 * was + 0.25 * seconds


class _locked:  # noqa: N801 - used like a function: ``with _locked(session):``
    """Hold the session's lock with its agent identity set (see the module docstring); a plain
    class, not a generator, as it wraps every step."""

    __slots__ = ("_s", "_agent")

    def __init__(self, s: _Session) -> None:
        self._s, self._agent = s, using_agent(s.agent)

    def __enter__(self) -> None:
        self._s.lock.acquire()
        self._agent.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._agent.__exit__()
        self._s.lock.release()


class SessionStore:
    """The env sessions of one server."""

    def __init__(self, max_sessions: int, agents: Agents | None = None) -> None:
        self.max_sessions = max_sessions
        self._agents = agents
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._loaded = threading.Event()
        self.load_errors: list[str] = []

    def preload(self) -> None:
        """Import the ``ROCKROLL_ENV_MODULES`` (run in a thread at server start)."""
        isolated = self._agents is not None and self._agents.mode == "uid"
        try:
            if os.environ.get(PRELOAD_ENV) == "1":
                try:
                    _import_registry()
                except Exception as e:  # noqa: BLE001 - env.make raises it again, with its session
                    print(f"sandbox server: cannot import the env registry: {e}", file=sys.stderr, flush=True)
            for name in [m.strip() for m in os.environ.get("ROCKROLL_ENV_MODULES", "").split(",") if m.strip()]:
                if isolated and not trusted_module(name):
                    continue  # custom code: each of its sessions' workers imports it
                try:
                    importlib.import_module(name)
                except Exception as e:  # noqa: BLE001 - reported in health and on env.make
                    self.load_errors.append(f"cannot import {name}: {type(e).__name__}: {e}")
                    print(f"sandbox server: {self.load_errors[-1]}", file=sys.stderr, flush=True)
        finally:
            self._loaded.set()

    def _wait_loaded(self) -> None:
        self._loaded.wait(120)

    def __len__(self) -> int:
        return len(self._sessions)

    def _get(self, session_id: JSONValue) -> _Session:
        found = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if found is None:
            raise SessionNotFound(str(session_id))
        return found

    def _add(self, env_id: str, kwargs: dict[str, object], env: Env, agent: _Agent) -> str:
        with self._lock:
            if len(self._sessions) < self.max_sessions:
                sid = secrets.token_hex(8)
                self._sessions[sid] = _Session(env_id, kwargs, env, agent)
                return sid
        with using_agent(agent):
            env.close()
        agent.release()
        raise CapacityError(len(self._sessions), self.max_sessions, "sessions")

    def _build(self, env_id: str, kwargs: dict[str, object], state: JSONValue = None) -> tuple[Env, _Agent]:
        """A new env (its state set, if given) built with a fresh agent identity; both, or nothing on failure."""
        agent = _Agent(self._agents)
        try:
            if self._custom(env_id):
                identity = agent()
                assert identity is not None  # _custom is true only with agent uids
                return WorkerEnv(identity, env_id, kwargs, state), agent
            with using_agent(agent):
                env = _make(env_id, kwargs)
                if state is not None:
                    env.set_state(_state(state))
        except BaseException:
            agent.release()
            raise
        return env, agent

    def _custom(self, env_id: str) -> bool:
        """Whether ``env_id`` runs in a worker: agent uids, and an id this server's registry does
        not know (it holds only rockroll's own envs then, see the module docstring)."""
        if self._agents is None or self._agents.mode != "uid":
            return False
        return not _known(env_id)

    def _reserve_check(self) -> None:
        if len(self._sessions) >= self.max_sessions:
            raise CapacityError(len(self._sessions), self.max_sessions, "sessions")

    def make(self, env_id: str, kwargs: dict[str, object] | None = None) -> OpenedSession:
        self._wait_loaded()
        self._reserve_check()
        kwargs = dict(kwargs or {})
        env, agent = self._build(env_id, kwargs)
        return self._opened(self._add(env_id, kwargs, env, agent), env)

    @staticmethod
    def _opened(sid: str, env: Env) -> OpenedSession:
        prompt = env.system_prompt() if hasattr(env, "system_prompt") else ""
        env_id = str(getattr(env.unwrapped, "spec_id", ""))
        opened: OpenedSession = {"session_id": sid, "env_id": env_id, "system_prompt": str(prompt)}
        tools = tools_of(env)
        if tools:  # a text env's answer stays as it was
            opened["tools"] = tools_to_wire(tools)
        return opened

    def quick(self, session_id: object, op: str) -> bool:
        """Whether ``op`` (``env.step`` or ``env.reset``) on this session can run on the caller's thread
        without holding it up: an env in this process (not a custom env's worker) whose recent calls of
        that op each took under :data:`QUICK_S`, and that no other call holds now. An unknown session
        is quick (its call fails at once). The channel runs quick calls inline and the others on a pool;
        a session's first step and first reset are never quick (their time is not known yet)."""
        s = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if s is None:
            return True
        return 0 <= s.cost.get(op, -1.0) < QUICK_S and not s.lock.locked() and not isinstance(s.env, WorkerEnv)

    def reset(self, session_id: JSONValue, seed: JSONValue = None, options: JSONValue = None) -> list[object]:
        if seed is not None and not isinstance(seed, int):
            raise TypeError(f"a seed is an int or None, got {type(seed).__name__}")
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"reset options are an object or None, got {type(options).__name__}")
        s = self._get(session_id)
        with _locked(s):
            t = time.perf_counter()
            try:
                obs, info = s.env.reset(seed=seed, options=options)
            finally:
                s.timed("env.reset", time.perf_counter() - t)
            return [obs, info]

    def step(self, session_id: JSONValue, action: JSONValue) -> list[object]:
        played = read_action(action, max_chars=_MAX_ACTION_CHARS)
        s = self._get(session_id)
        with _locked(s):
            t = time.perf_counter()
            try:
                obs, reward, terminated, truncated, info = s.env.step(played)
            finally:
                s.timed("env.step", time.perf_counter() - t)
            return [obs, _float(reward), bool(terminated), bool(truncated), info]

    def get_state(self, session_id: JSONValue) -> object:
        s = self._get(session_id)
        with _locked(s):
            return s.env.get_state()

    def set_state(self, session_id: JSONValue, state: JSONValue) -> None:
        s = self._get(session_id)
        with _locked(s):
            s.env.set_state(_state(state))

    def action_candidates(self, session_id: JSONValue) -> list[str]:
        s = self._get(session_id)
        with _locked(s):
            fn = getattr(s.env, "action_candidates", None)
            return list(fn()) if fn else []

    def render(self, session_id: JSONValue) -> str:
        s = self._get(session_id)
        with _locked(s):
            return str(s.env.render())

    def fork(self, session_id: JSONValue) -> OpenedSession:
        s = self._get(session_id)
        self._reserve_check()
        with _locked(s):
            state = s.env.get_state()
        env, agent = self._build(s.env_id, s.kwargs, state)
        return self._opened(self._add(s.env_id, s.kwargs, env, agent), env)

    def close(self, session_id: JSONValue) -> None:
        with self._lock:
            s = self._sessions.pop(session_id, None) if isinstance(session_id, str) else None
        if s is not None:
            if isinstance(s.env, WorkerEnv):
                s.env.kill()  # now, not after a hung call gives up the session's lock
            try:
                with _locked(s):
                    s.env.close()
            finally:
                s.agent.release()

    def close_all(self) -> None:
        for sid in list(self._sessions):
            self.close(sid)
