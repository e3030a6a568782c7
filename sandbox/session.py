"""The session-handle contract (:class:`EnvSession`) and ``RemoteSession``, a session in a sandbox.

:class:`EnvSession` is what every handle on one env session offers, wherever the session runs:
the text-env contract of :class:`~rockroll.envs.core.TextEnvProtocol` plus the session's ids
(``session_id``, ``env_id``, ``sandbox_id``), ``closed``, ``render`` and ``fork``. A
:class:`RemoteSession` (a session in a sandbox of this manager) and a
:class:`~rockroll.sandbox.node.remote.NodeSession` (one on a standalone node agent) satisfy it, as
do the control plane's handles above this layer; tables of sessions (the node agent's
``AgentSession``, the control plane's live sessions) hold one. Code that only plays envs keeps
annotating with ``TextEnvProtocol``; code that needs a session's ids or ``fork`` asks for an
``EnvSession``.

``RemoteSession`` follows the text-env contract of :mod:`rockroll.envs.core` (``reset``, ``step``, ``close``,
``get_state``/``set_state``, ``system_prompt``, ``action_candidates``) plus ``fork``, so rollout
code runs the same against ``envhub.make(...)`` and ``SandboxManager.open_session(...)``. Env errors
(``ResetNeeded``, ``EnvConfigError``...) come back as the same exception types. A step takes the agent's
text or a turn with tool calls (:class:`~rockroll.envs.tools.ToolAction`, sent as
:func:`~rockroll.envs.tools.action_to_wire` writes it); :attr:`RemoteSession.tools` are the env's tools, as
the session's open answer listed them.

A session lives in one incarnation of its sandbox. When that sandbox dies or is replaced, every
call raises :class:`~rockroll.sandbox.errors.SandboxLost` (a typed, retryable infrastructure failure); open
a new session to go on.

Threat model: observations and infos are untrusted strings/JSON from the sandbox.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from rockroll.envs.action_wire import tools_from_wire
from rockroll.envs.core import TextEnvProtocol
from rockroll.envs.errors import ActionTypeError
from rockroll.envs.tools import Action, Tool, ToolAction, action_to_wire
from rockroll.sandbox.client import SandboxClient, _to_exception
from rockroll.sandbox.errors import SandboxLost, SandboxTimeout, SessionLost, SessionNotFound
from rockroll.sandbox.server.wire import OpenedSession

__all__ = ["EnvSession", "RemoteSession", "SessionHost", "run_batch"]


@runtime_checkable
class EnvSession(TextEnvProtocol, Protocol):
    """A handle on one env session hosted elsewhere (see the module docstring).

    ``isinstance(handle, EnvSession)`` checks that the attributes and methods exist, not their types.
    """

    #: the session's id where it is hosted
    session_id: str
    #: the registered env id it plays
    env_id: str
    #: the sandbox that hosts it ("" where the handle does not know)
    sandbox_id: str
    #: True once :meth:`close` ran (every later call raises)
    closed: bool

    def render(self) -> str:
        """The current observation text ("" where the host does not render on demand)."""
        ...

    def fork(self) -> EnvSession:
        """A second session of the same host that continues from this one's current state."""
        ...


class SessionHost(Protocol):
    """What a session needs of its sandbox (:class:`~rockroll.sandbox.managed.ManagedSandbox` is one).

    ``generation`` and ``deleted`` tell whether the incarnation the session lives in is gone;
    ``report_failure`` asks the monitor for a probe now; ``session_closed`` frees a slot;
    ``attach_session`` wraps a session the server opened (by ``fork``).
    """

    id: str
    generation: int
    deleted: bool

    def report_failure(self) -> None: ...

    def session_closed(self) -> None: ...

    def attach_session(self, info: OpenedSession) -> RemoteSession: ...


class RemoteSession:
    """One env session hosted by a sandbox (see the module docstring)."""

    def __init__(self, sandbox: SessionHost, info: OpenedSession, client: SandboxClient) -> None:
        self.sandbox = sandbox
        self.sandbox_id = sandbox.id
        self.session_id: str = info["session_id"]
        self.env_id: str = info.get("env_id", "")
        self._system_prompt: str = info.get("system_prompt", "")
        self._tools = tools_from_wire(info.get("tools"))
        self._generation = sandbox.generation
        #: the connection to the sandbox's server (the node agent's channels find the sandbox by it)
        self.client = client
        self._lock = threading.Lock()
        self.closed = False

    def __repr__(self) -> str:
        return f"RemoteSession({self.env_id!r}, sandbox={self.sandbox_id}, session={self.session_id})"

    def check(self) -> None:
        """Raise what a call would before it is sent: ``SessionNotFound`` once closed, ``SandboxLost``
        once the sandbox incarnation it lives in is gone."""
        if self.closed:
            raise SessionNotFound(self.session_id)
        if self.sandbox.generation != self._generation or self.sandbox.deleted:
            raise SandboxLost(self.sandbox_id, "the sandbox was restarted or deleted")

    def _call(self, op: str, **args: object) -> Any:
        self.check()
        with self._lock:
            if self.closed:  # closed while this call waited for the lock
                raise SessionNotFound(self.session_id)
            try:
                return self.client.call(op, None, session_id=self.session_id, **args)
            except SessionNotFound as e:
                raise SandboxLost(self.sandbox_id, "the server no longer knows this session") from e
            except SandboxTimeout:
                raise
            except SessionLost as e:  # this session's env process only: the sandbox is fine
                e.sandbox_id = e.sandbox_id or self.sandbox_id
                raise
            except SandboxLost:
                self.sandbox.report_failure()
                raise

    # ------------------------------------------------------- env contract
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = self._call("env.reset", seed=seed, options=options)
        return obs, info

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not isinstance(action, (str, ToolAction)):
            raise ActionTypeError(action)
        obs, reward, terminated, truncated, info = self._call("env.step", action=action_to_wire(action))
        return obs, reward, terminated, truncated, info

    @property
    def tools(self) -> tuple[Tool, ...]:
        return self._tools

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = self._call("env.get_state")
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        self._call("env.set_state", state=state)

    def system_prompt(self) -> str:
        return self._system_prompt

    def action_candidates(self) -> list[str]:
        candidates: list[str] = self._call("env.action_candidates")
        return candidates

    def render(self) -> str:
        text: str = self._call("env.render")
        return text

    def fork(self) -> RemoteSession:
        """A second session in the same sandbox, starting from this one's current state."""
        info = self._call("env.fork")
        return self.sandbox.attach_session(info)

    def close(self) -> None:
        """Close the session (idempotent; a lost sandbox is not an error here)."""
        # under the lock: a batch another thread sends on this session's connection (``run_batch``)
        # finishes before the connection closes, never loses it halfway
        with self._lock:
            if self.closed:
                return
            try:
                if self.sandbox.generation == self._generation and not self.sandbox.deleted:
                    self.client.call("env.close", session_id=self.session_id)
            except (SandboxLost, SandboxTimeout):
                pass
            finally:
                self.closed = True
                self.client.close()
                self.sandbox.session_closed()

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_batch(items: Sequence[tuple[RemoteSession, str, Mapping[str, object]]]) -> list[object]:
    """Run ``(session, "step" | "reset", args)`` items with one round trip per sandbox.

    ``args`` is ``{"action": ...}`` for a step (text, a :class:`~rockroll.envs.tools.ToolAction` or its wire
    form) and ``{"seed": ..., "options": ...}`` for a reset.
    Returns, in order, each item's answer (a step's 5-tuple or a reset's pair) or the exception
    it raised (``SandboxLost`` for every item of a sandbox that died), so one failure never
    spoils the rest.
    """
    results: list[object] = [None] * len(items)
    groups: dict[int, list[int]] = {}
    for i, (session, op, _args) in enumerate(items):
        try:
            session.check()
        except (SessionNotFound, SandboxLost) as e:
            results[i] = e
            continue
        if op not in ("step", "reset"):
            results[i] = ValueError(f"batch op must be 'step' or 'reset', got {op!r}")
        else:
            groups.setdefault(id(session.sandbox), []).append(i)
    for indices in groups.values():
        first = items[indices[0]][0]
        wire = [{"session_id": items[i][0].session_id, "op": items[i][1], **_wire_args(items[i][2])} for i in indices]
        try:
            with first._lock:  # a session closed meanwhile still carries the batch (on a fresh connection)
                answers = first.client.call("env.batch", items=wire)
                if first.closed:
                    first.client.close()
        except SandboxLost as e:
            first.sandbox.report_failure()
            for i in indices:
                results[i] = e
            continue
        except SandboxTimeout as e:
            for i in indices:
                results[i] = e
            continue
        for i, answer in zip(indices, answers, strict=True):
            session, op, _ = items[i]
            if "error" in answer:
                err = _to_exception(answer["error"])
                if isinstance(err, SessionNotFound):
                    err = SandboxLost(session.sandbox_id, "the server no longer knows this session")
                results[i] = err
            elif op == "step":
                obs, reward, terminated, truncated, info = answer["result"]
                results[i] = (obs, reward, terminated, truncated, info)
            else:
                obs, info = answer["result"]
                results[i] = (obs, info)
    return results


def _wire_args(args: Mapping[str, object]) -> Mapping[str, object]:
    """A batch item's arguments as JSON: a :class:`~rockroll.envs.tools.ToolAction` in its wire form."""
    action = args.get("action")
    return {**args, "action": action_to_wire(action)} if isinstance(action, ToolAction) else args
