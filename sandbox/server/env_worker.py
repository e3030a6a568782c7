"""One custom env session, hosted apart from the in-sandbox server: ``python -m rockroll.sandbox.server.env_worker``.

The server (:mod:`rockroll.sandbox.server.worker_env`) starts this process for each session of a
custom env (one not shipped with rockroll) as that session's agent uid, through ``setpriv`` with no
capability at all and ``no_new_privs``, in the session's 0700 folder. The worker imports the custom
code itself (``ROCKROLL_ENV_MODULES`` and the control plane's uploaded plugins, through
:mod:`rockroll.sandbox.server.plugins`), builds the env and answers the server's calls until its
stdin closes or it is killed.

Protocol: frames on the worker's stdin (calls) and stdout (answers), each a 4-byte big-endian
length and that many bytes of UTF-8 JSON. A call is ``{"op", "args"}``; an answer is
``{"result": ...}`` or ``{"error": {"type", "message", "attrs"}}``. JSON only, both ways: the
server never unpickles anything this process says. Before any custom code is imported, the
process moves its protocol pipes aside and points its file descriptors 0 and 1 at ``/dev/null``
and stderr, so what env code prints never corrupts a frame.

Threat model: everything in this process is untrusted (it runs the owner's code as the agent's
uid). It can only answer its own session's calls, within the size cap and the timeout the server
sets; it holds no capability, cannot reach the server's socket or files, nor another session's
folder. Standard library and rockroll's env layer only.
"""

from __future__ import annotations

import importlib
import json
import os
import struct
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from rockroll.envs.action_wire import read_action, tools_of, tools_to_wire
from rockroll.envs.errors import StateError
from rockroll.envs.json_types import JSONValue
from rockroll.sandbox.server.wire import ErrorInfo

if TYPE_CHECKING:
    from rockroll.envs.wrappers import MaxSteps

__all__ = ["main", "read_frame", "write_frame", "MAX_FRAME_BYTES"]

#: the largest frame either side accepts (the in-sandbox server's own request cap)
MAX_FRAME_BYTES = 32 * 1024 * 1024
_HEADER = struct.Struct(">I")


def write_frame(out: BinaryIO, payload: object) -> None:
    """Write one frame (raises ``ValueError`` for a payload over :data:`MAX_FRAME_BYTES`)."""
    body = json.dumps(payload).encode()
    if len(body) > MAX_FRAME_BYTES:
        raise ValueError(f"answer of {len(body)} bytes exceeds the cap of {MAX_FRAME_BYTES} bytes")
    out.write(_HEADER.pack(len(body)) + body)
    out.flush()


def _read_exact(inp: BinaryIO, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = inp.read(n - len(buf))
        if not chunk:
            raise EOFError("the server closed the pipe")
        buf += chunk
    return bytes(buf)


def read_frame(inp: BinaryIO) -> JSONValue:
    """Read one frame (the worker's side: blocking, the server is trusted to send whole frames)."""
    (n,) = _HEADER.unpack(_read_exact(inp, _HEADER.size))
    if n > MAX_FRAME_BYTES:
        raise ValueError(f"call of {n} bytes exceeds the cap of {MAX_FRAME_BYTES} bytes")
    return json.loads(_read_exact(inp, n))


def _error(e: BaseException) -> ErrorInfo:
    attrs: dict[str, object] = {k: v for k, v in vars(e).items() if isinstance(v, (str, int, float, bool, type(None)))}
    return {"type": type(e).__name__, "message": str(e)[:4000], "attrs": attrs}


def _import_modules() -> None:
    """Import every module of ``ROCKROLL_ENV_MODULES`` (the plugins hook among them); errors say which."""
    for name in (m.strip() for m in os.environ.get("ROCKROLL_ENV_MODULES", "").split(",")):
        if name:
            try:
                importlib.import_module(name)
            except Exception as e:  # noqa: BLE001 - the make call that follows names the id
                print(f"env worker: cannot import {name}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)


class _Host:
    """The one env of this worker and its calls."""

    def __init__(self) -> None:
        self.made: MaxSteps | None = None

    @property
    def env(self) -> MaxSteps:
        if self.made is None:
            raise RuntimeError("no env was made in this worker")
        return self.made

    def make(self, env_id: str, kwargs: dict[str, object] | None = None, state: JSONValue = None) -> dict[str, object]:
        _import_modules()
        # here: the server imports this module's framing without the env libraries
        from rockroll.sandbox.server.env_registry import make

        self.made = make(env_id, **(kwargs or {}))
        if state is not None:
            self.set_state(state)
        prompt = self.env.system_prompt() if hasattr(self.env, "system_prompt") else ""
        env_name = str(getattr(self.env.unwrapped, "spec_id", "") or env_id)
        return {"env_id": env_name, "system_prompt": str(prompt), "tools": tools_to_wire(tools_of(self.env))}

    def reset(self, seed: int | None = None, options: dict[str, JSONValue] | None = None) -> list[object]:
        obs, info = self.env.reset(seed=seed, options=options)
        return [obs, info]

    def step(self, action: JSONValue) -> list[object]:
        obs, reward, terminated, truncated, info = self.env.step(read_action(action, max_chars=MAX_FRAME_BYTES))
        return [obs, float(reward), bool(terminated), bool(truncated), info]

    def get_state(self) -> object:
        return self.env.get_state()

    def set_state(self, state: JSONValue) -> None:
        if not isinstance(state, dict):  # what the env's set_state says of it
            raise StateError(f"a snapshot is an object, got {type(state).__name__}")
        self.env.set_state(state)

    def action_candidates(self) -> list[str]:
        fn = getattr(self.env, "action_candidates", None)
        return [str(c) for c in fn()] if fn else []

    def render(self) -> str:
        return str(self.env.render())

    def close(self) -> None:
        if self.made is not None:
            self.made.close()


def main() -> None:
    """Serve calls on the inherited stdin/stdout until stdin closes."""
    inp = os.fdopen(os.dup(0), "rb", buffering=0)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)  # prints of env code go to stderr, never into a frame
    sys.stdout = sys.stderr
    host = _Host()
    ops: dict[str, Callable[..., object]] = {name: getattr(host, name) for name in (
        "make", "reset", "step", "get_state", "set_state", "action_candidates", "render", "close")}  # fmt: skip
    while True:
        try:
            call = read_frame(inp)
        except EOFError:
            break
        try:
            op, args = (call.get("op"), call.get("args")) if isinstance(call, dict) else (None, None)
            if not isinstance(op, str) or op not in ops or not isinstance(args, dict):
                raise ValueError("a call is {'op', 'args'} with a known op")
            if op != "make" and host.made is None:
                raise RuntimeError("no env was made in this worker")
            answer: dict[str, object] = {"result": ops[op](**args)}
        except Exception as e:  # noqa: BLE001 - every failure goes back, typed
            answer = {"error": _error(e)}
        try:
            write_frame(out, answer)
        except (TypeError, ValueError) as e:  # not JSON, or too large: say so instead
            write_frame(out, {"error": _error(e)})
        if isinstance(call, dict) and call.get("op") == "close":
            break


if __name__ == "__main__":
    main()
