"""Running commands inside a sandbox for the in-sandbox server.

A command is an argv list (run directly) or a string (run by ``/bin/sh -c``). It runs in its
own process group in the workspace, with the server's environment (minimal, set by the
backend, plus the spec's ``env``) and the call's ``env``; on timeout the whole group gets SIGKILL (a fork bomb's children
included, repeatedly until none is left), and so does every process that still carries the command's
``ROCKROLL_EXEC_ID`` in its environment: children that left the group (``setsid``, a daemon's double
fork) go too. A command that ends by itself keeps its ``setsid`` daemons (they may serve later
calls); its group's background children go. Output beyond ``max_output`` bytes per stream is read
and dropped, and the result says ``truncated``. A command killed by the kernel's OOM killer is
reported as ``oom_killed``: the sandbox cgroup's ``oom_kill`` counter moved while it ran, it did not
time out, and it died of SIGKILL or exited 137 (what a shell reports when the child it waited for was
killed by SIGKILL). The counter is the container's cgroup's, or that of the folder the process
backend names in ``ROCKROLL_MEMORY_CGROUP``.

Given an ``identity`` (:mod:`rockroll.sandbox.server.agents`), the command runs as that agent uid
with no capabilities (:func:`~rockroll.envs.agent_identity.argv_as`), ``HOME`` its home, and the
server reads its processes' environments with that identity's file rights.

With an identity the command is also bounded (:func:`~rockroll.envs.agent_identity.argv_as`): its
uid holds at most the sandbox's agent pids (``RLIMIT_NPROC``, below the sandbox's pids limit) and its
processes are the OOM killer's first choice, so a fork bomb or a memory hog ends as this command's
result ("Cannot fork", ``oom_killed``) while the server keeps the threads and memory it answers with.
When the server goes away, :func:`kill_running` ends every command still running.

Threat model: the command is untrusted. With an identity it cannot write the server's socket or
files, nor signal or trace the server; without one (``agent_isolation == "none"``) it runs with the
server's own rights. The sandbox around the server (container or namespaces) is the boundary
towards the host. A command that clears its environment escapes the timeout's sweep; its session's
end (every process of its uid) or the sandbox's stop still ends it.
"""

from __future__ import annotations

import os
import secrets
import selectors
import signal
import subprocess
import time
from collections.abc import Callable

from rockroll.envs.agent_identity import AgentIdentity, argv_as, fs_as
from rockroll.envs.json_types import JSONObject
from rockroll.sandbox.retry import FIRST_DELAY_S, Backoff

__all__ = ["run_command", "oom_kill_count", "kill_running"]

_OOM_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
#: the variable that marks every process of one command (see the module docstring)
EXEC_ID = "ROCKROLL_EXEC_ID"
#: the exit status of a shell whose (last) child was killed by SIGKILL
_SHELL_KILLED = 128 + signal.SIGKILL
#: the commands running now (their process groups), for :func:`kill_running` at the server's end
_RUNNING: set[subprocess.Popen[bytes]] = set()


def kill_running() -> None:
    """SIGKILL the process group of every command still running (the server is going away)."""
    for proc in list(_RUNNING):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue


def _oom_files() -> tuple[str, ...]:
    own = os.environ.get("ROCKROLL_MEMORY_CGROUP")  # a process sandbox's cgroup (set by its backend)
    return (f"{own}/memory.events", f"{own}/memory.oom_control") if own else _OOM_FILES


def oom_kill_count() -> int:
    """The cgroup's OOM kill counter (v2 or v1), or -1 when it cannot be read."""
    for path in _oom_files():
        try:
            with open(path) as f:
                for line in f:
                    key, _, val = line.partition(" ")
                    if key == "oom_kill":
                        return int(val)
        except (OSError, ValueError):
            continue
    return -1


def _collect(
    proc: subprocess.Popen[bytes], stdin: bytes | None, limit: int, timeout_s: float
) -> tuple[bytes, bytes, bool, bool]:
    """Feed stdin and read both pipes in this thread (no helper threads: a fork bomb may have
    used up the pids limit) until EOF, the timeout, or shortly after the command exited.

    Returns ``(stdout, stderr, truncated, timed_out)``. When the command exits while children it
    left behind still hold the pipes, its process group is killed so the pipes close.
    """
    sel = selectors.DefaultSelector()
    bufs: dict[int, bytearray] = {}
    for stream in (proc.stdout, proc.stderr):
        assert stream is not None  # both are PIPE
        os.set_blocking(stream.fileno(), False)
        bufs[stream.fileno()] = bytearray()
        sel.register(stream.fileno(), selectors.EVENT_READ)
    pending = memoryview(stdin or b"")
    stdin_fd = -1
    if proc.stdin is not None:
        stdin_fd = proc.stdin.fileno()
        os.set_blocking(stdin_fd, False)
        sel.register(stdin_fd, selectors.EVENT_WRITE)
    deadline = time.monotonic() + timeout_s
    truncated = timed_out = reaped = False
    while sel.get_map():
        if not reaped and proc.poll() is not None:
            _kill_group(proc)  # background children of a finished command go too
            reaped, deadline = True, min(deadline, time.monotonic() + 1.0)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = not reaped
            break
        for key, _ in sel.select(min(remaining, 0.05)):
            fd = key.fd
            if fd == stdin_fd:
                try:
                    pending = pending[os.write(fd, pending[:65536]) :]
                except BlockingIOError:
                    continue
                except BrokenPipeError:  # the command does not read its stdin: fine
                    pending = pending[:0]
                if not pending:
                    sel.unregister(fd)
                    if proc.stdin is not None:  # stdin_fd is set only with a pipe
                        proc.stdin.close()
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(fd)
                continue
            buf = bufs[fd]
            room = max(0, limit - len(buf))
            buf += chunk[:room]
            truncated = truncated or len(chunk) > room
    sel.close()
    assert proc.stdout is not None and proc.stderr is not None
    return bytes(bufs[proc.stdout.fileno()]), bytes(bufs[proc.stderr.fileno()]), truncated, timed_out


def _kill_group(proc: subprocess.Popen[bytes], patience_s: float = 3.0) -> None:
    """SIGKILL the command's process group until it is empty.

    A fork bomb keeps adding members while we kill, and killed members stay in the group
    until init reaps them, so keep killing for up to ``patience_s`` (bounded: a group that
    outlives it is left to the pids limit).
    """
    for _ in Backoff(timeout_s=patience_s, max_delay_s=FIRST_DELAY_S):  # kill again every few ms
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        proc.poll()


def _marked(needle: bytes) -> list[int]:
    """Pids (not this server's) whose environment holds ``needle`` (a ``NAME=value`` entry)."""
    me, found = os.getpid(), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:  # empty for a zombie: it is dead already
                if needle in f.read().split(b"\0"):
                    found.append(int(entry.name))
        except OSError:  # gone, or another user's
            continue
    return found


def _kill_marked(exec_id: str, patience_s: float = 3.0) -> int:
    """SIGKILL every process of the command ``exec_id``, again until none is left; returns the kills sent.

    Bounded by ``patience_s`` like :func:`_kill_group`: a tree that outgrows it is left to the pids limit.
    """
    needle, killed = f"{EXEC_ID}={exec_id}".encode(), 0
    for _ in Backoff(timeout_s=patience_s, max_delay_s=FIRST_DELAY_S):
        pids = _marked(needle)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                continue
    return killed


def run_command(
    cmd: str | list[str],
    *,
    workspace: str,
    cmd_timeout_s: float = 30.0,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    max_output: int = 1_000_000,
    stdin: str | None = None,
    resolve: Callable[[str], str] | None = None,
    identity: AgentIdentity | None = None,
) -> JSONObject:
    """Run one command and return the fields of an :class:`~rockroll.sandbox.base.ExecResult`."""
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
    full_env["HOME"] = identity.home if identity is not None else workspace
    full_env.update({str(k): str(v) for k, v in (env or {}).items()})
    exec_id = secrets.token_hex(8)
    full_env[EXEC_ID] = exec_id  # after the call's env: a caller cannot choose another command's id
    oom_before = oom_kill_count()
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv_as(identity, argv, cwd=run_dir),  # entered as the agent: its workspace is 0700
            cwd=run_dir if identity is None else "/",
            env=full_env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as e:
        return {"exit_code": 127, "stdout": "", "stderr": f"{type(e).__name__}: {e}", "duration_s": 0.0}
    _RUNNING.add(proc)
    try:
        return _finish(proc, stdin, max_output, cmd_timeout_s, exec_id, identity, oom_before, start)
    finally:
        _RUNNING.discard(proc)


def _finish(
    proc: subprocess.Popen[bytes], stdin: str | None, max_output: int, cmd_timeout_s: float, exec_id: str,
    identity: AgentIdentity | None, oom_before: int, start: float,
) -> JSONObject:  # fmt: skip
    """Collect a started command's output and end, kill what it left as :func:`run_command` says."""
    out, err, truncated, timed_out = _collect(
        proc, stdin.encode() if stdin is not None else None, max_output, float(cmd_timeout_s)
    )
    if not timed_out:  # its pipes closed: it is exiting (closing stdout comes before exit_group)
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
    _kill_group(proc)  # on timeout, or a command that closed its pipes and lives on; otherwise a no-op
    if timed_out:
        with fs_as(identity):  # /proc/PID/environ of the agent's processes opens to its own uid
            _kill_marked(exec_id)  # killed: its children that left the group (setsid) go too
    proc.wait()
    for stream in (proc.stdout, proc.stderr, proc.stdin):
        if stream is not None and not stream.closed:
            stream.close()
    code = proc.returncode
    oom_after = oom_kill_count()
    killed = code in (-signal.SIGKILL, _SHELL_KILLED)
    oom = oom_before >= 0 and oom_after > oom_before and killed and not timed_out
    return {
        "exit_code": code if code >= 0 else 128 - code,
        "stdout": out.decode("utf-8", "replace"),
        "stderr": err.decode("utf-8", "replace"),
        "timed_out": timed_out,
        "truncated": truncated,
        "oom_killed": oom,
        "duration_s": round(time.monotonic() - start, 4),
    }
