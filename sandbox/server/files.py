"""Workspace files for the in-sandbox server: read, write and list under one root.

Paths are relative to the workspace root. A path is refused (:class:`SandboxPathError`) when it
is absolute, contains a NUL byte, or resolves (after following symlinks) outside the root; the last
component is opened with ``O_NOFOLLOW`` so a symlink swapped in after the check is not followed.
Only regular files are read or written: the file is opened with ``O_NONBLOCK`` (opening a FIFO
never waits for its other end) and anything ``fstat`` does not call a regular file (FIFO, socket,
device, directory) is refused before a byte moves. Reads are capped (``max_bytes``,
:class:`FileTooLarge` beyond it) before they start.

Threat model: the agent controls paths and can create symlinks, FIFOs and huge files inside the
workspace (through ``exec``); the server must never read or write outside the root on its behalf,
nor let a file call hang or fill memory. Inside a container
the root filesystem is read-only anyway; for the process backend this check is the boundary for
file calls. A workspace given an agent identity (:mod:`rockroll.sandbox.server.agents`) is touched
with that agent's file rights only (``setfsuid`` in the calling thread): what the agent planted
there cannot make the server read or write anything the agent itself could not.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from rockroll.envs.agent_identity import AgentIdentity, fs_as
from rockroll.sandbox.errors import FileTooLarge, SandboxPathError
from rockroll.sandbox.server.wire import FileEntry

__all__ = ["Workspace"]

P = ParamSpec("P")
R = TypeVar("R")


def _as_agent(fn: Callable[Concatenate[Workspace, P], R]) -> Callable[Concatenate[Workspace, P], R]:
    """Run the method with the workspace's agent identity's file rights."""

    @functools.wraps(fn)
    def wrapper(self: Workspace, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with fs_as(self.identity):
            return fn(self, *args, **kwargs)

    return wrapper


class Workspace:
    """File access confined to ``root``, as ``identity`` when one is given."""

    def __init__(self, root: str, identity: AgentIdentity | None = None) -> None:
        self.root = os.path.realpath(root)
        self.identity = identity
        with fs_as(identity):
            os.makedirs(self.root, exist_ok=True)

    @_as_agent
    def resolve(self, path: str, *, must_exist: bool = False) -> str:
        """The real absolute path of ``path`` inside the root, or raise SandboxPathError."""
        if not isinstance(path, str) or not path:
            raise SandboxPathError(str(path), "empty or not a string")
        if "\x00" in path:
            raise SandboxPathError(path, "contains a NUL byte")
        if os.path.isabs(path):
            raise SandboxPathError(path, "absolute paths are not allowed; give a path relative to the workspace")
        full = os.path.realpath(os.path.join(self.root, path))
        if full != self.root and not full.startswith(self.root + os.sep):
            raise SandboxPathError(path, "resolves outside the workspace")
        if must_exist and not os.path.lexists(full):
            raise SandboxPathError(path, "no such file")
        return full

    @_as_agent
    def read(self, path: str, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        """The bytes of the regular file ``path`` (:class:`FileTooLarge` over ``max_bytes``)."""
        full = self.resolve(path, must_exist=True)
        with os.fdopen(_open_regular(path, full, os.O_RDONLY), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > max_bytes:
                raise FileTooLarge(path, size, max_bytes)
            data = f.read(max_bytes + 1)  # it may have grown since fstat
        if len(data) > max_bytes:
            raise FileTooLarge(path, len(data), max_bytes)
        return data

    @_as_agent
    def write(self, path: str, data: bytes, mode: int = 0o644) -> int:
        """Create or replace the regular file ``path`` with ``data``; returns its size."""
        full = self.resolve(path)
        parent = os.path.dirname(full)
        if not parent.startswith(self.root):
            raise SandboxPathError(path, "resolves outside the workspace")
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            raise SandboxPathError(path, e.strerror or str(e)) from e
        # no O_TRUNC: nothing is changed before the file is known to be a regular one
        with os.fdopen(_open_regular(path, full, os.O_WRONLY | os.O_CREAT, mode & 0o777), "wb") as f:
            os.ftruncate(f.fileno(), 0)
            f.write(data)
        return len(data)

    @_as_agent
    def list(self, path: str = ".") -> list[FileEntry]:
        full = self.resolve(path, must_exist=True)
        if not os.path.isdir(full):
            raise SandboxPathError(path, "not a directory")
        out: list[FileEntry] = []
        for entry in sorted(os.scandir(full), key=lambda e: e.name):
            st = entry.stat(follow_symlinks=False)
            kind = "dir" if entry.is_dir(follow_symlinks=False) else "link" if entry.is_symlink() else "file"
            out.append({"name": entry.name, "type": kind, "size": st.st_size})
        return out


def _open_regular(path: str, full: str, flags: int, mode: int = 0o644) -> int:
    """A blocking descriptor of the regular file ``full``, or :class:`SandboxPathError`.

    Opened with ``O_NONBLOCK`` (a FIFO opens at once instead of waiting for a writer or reader),
    ``O_NOFOLLOW`` and ``O_NOCTTY``; anything but a regular file is closed again and refused.
    """
    try:
        fd = os.open(full, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ENXIO:  # a FIFO nobody reads, or a socket
            raise SandboxPathError(path, "not a regular file (a FIFO or socket)") from e
        if e.errno == errno.ELOOP:
            raise SandboxPathError(path, "is a symlink (swapped in after the path was checked)") from e
        raise SandboxPathError(path, e.strerror or str(e)) from e
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise SandboxPathError(
                path, f"not a regular file (a {_kind(st_mode)}); only regular files are read or written"
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kind(st_mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):  # fmt: skip
        if test(st_mode):
            return name
    return "special file"
