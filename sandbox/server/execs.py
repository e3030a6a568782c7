"""Running commands inside a sandbox for the in-sandbox server.

A command is an argv list (run directly) or a string (run by ``/bin/sh -c``). It runs in its
own process group in the workspace, with the server's environment (minimal, set by the
backend, plus the spec's ``env``) and the call's ``env``; on timeout the whole group gets SIGKILL (a fork bomb's children
included, repeatedly until none is left). Output beyond ``max_output`` bytes per stream is read
and dropped, and the result says ``truncated``. A command killed by the kernel's OOM killer is
reported as ``oom_killed`` (the cgroup's ``oom_kill`` counter moved, or SIGKILL with no timeout
while memory was at its limit).

Threat model: the command is untrusted and runs with the server's (unprivileged) rights; the
sandbox around the server (container or namespaces) is the boundary, not this module.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import Any

__all__ = ["run_command", "oom_kill_count"]

_OOM_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


def oom_kill_count() -> int:
    """The cgroup's OOM kill counter (v2 or v1), or -1 when it cannot be read."""
    for path in _OOM_FILES:
        try:
            with open(path) as f:
                for line in f:
                    key, _, val = line.partition(" ")
                    if key == "oom_kill":
                        return int(val)
        except (OSError, ValueError):
            continue
    return -1


def _drain(stream: Any, limit: int, out: list[bytes], flags: dict[str, bool]) -> None:
    kept = 0
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        if kept < limit:
            part = chunk[: limit - kept]
            out.append(part)
            kept += len(part)
            if len(part) < len(chunk):
                flags["truncated"] = True
        else:
            flags["truncated"] = True
    stream.close()


def _kill_group(proc: subprocess.Popen[bytes], patience_s: float = 3.0) -> None:
    """SIGKILL the command's process group until it is empty.

    A fork bomb keeps adding members while we kill, and killed members stay in the group
    until init reaps them, so keep killing for up to ``patience_s`` (bounded: a group that
    outlives it is left to the pids limit).
    """
    deadline = time.monotonic() + patience_s
    while True:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        proc.poll()
        if time.monotonic() > deadline:
            return
        time.sleep(0.005)


def run_command(
    cmd: str | list[str],
    *,
    workspace: str,
    cmd_timeout_s: float = 30.0,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    max_output: int = 1_000_000,
    stdin: str | None = None,
    resolve: Any = None,
) -> dict[str, Any]:
    """Run one command and return the fields of an :class:`~sandbox.base.ExecResult`."""
    if isinstance(cmd, str):
        argv = ["/bin/sh", "-c", cmd]
    elif isinstance(cmd, list) and cmd and all(isinstance(a, str) for a in cmd):
        argv = list(cmd)
    else:
        raise ValueError("cmd must be a non-empty list of strings or a shell string")
    if not (0 < float(cmd_timeout_s) <= 24 * 3600):
        raise ValueError(f"timeout_s must be in (0, 86400], got {cmd_timeout_s}")
    run_dir = resolve(cwd) if (cwd and resolve) else workspace
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKROLL_")}
    full_env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    full_env["HOME"] = workspace
    full_env.update({str(k): str(v) for k, v in (env or {}).items()})
    oom_before = oom_kill_count()
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=run_dir,
            env=full_env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as e:
        return {"exit_code": 127, "stdout": "", "stderr": f"{type(e).__name__}: {e}", "duration_s": 0.0}
    flags = {"truncated": False}
    outs: list[bytes] = []
    errs: list[bytes] = []
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, max_output, outs, flags), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, max_output, errs, flags), daemon=True),
    ]
    for t in readers:
        t.start()
    if stdin is not None and proc.stdin is not None:
        try:
            proc.stdin.write(stdin.encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
    timed_out = False
    try:
        proc.wait(timeout=cmd_timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    _kill_group(proc)  # also reaps background children left behind by a finished command
    proc.wait()
    for t in readers:
        t.join(timeout=5)
    code = proc.returncode
    oom_after = oom_kill_count()
    oom = oom_before >= 0 and oom_after > oom_before and code == -signal.SIGKILL and not timed_out
    return {
        "exit_code": code if code >= 0 else 128 - code,
        "stdout": b"".join(outs).decode("utf-8", "replace"),
        "stderr": b"".join(errs).decode("utf-8", "replace"),
        "timed_out": timed_out,
        "truncated": flags["truncated"],
        "oom_killed": oom,
        "duration_s": round(time.monotonic() - start, 4),
    }
