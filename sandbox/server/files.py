"""Workspace files for the in-sandbox server: read, write and list under one root.

Paths are relative to the workspace root. A path is refused (:class:`SandboxPathError`) when it
is absolute, contains a NUL byte, or resolves (after following symlinks) outside the root; the last
component is opened with ``O_NOFOLLOW`` so a symlink swapped in after the check is not followed.

Threat model: the agent controls paths and can create symlinks inside the workspace (through
``exec``); the server must never read or write outside the root on its behalf. Inside a container
the root filesystem is read-only anyway; for the process backend this check is the boundary for
file calls.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from rockroll.sandbox.errors import SandboxPathError

__all__ = ["Workspace"]


class Workspace:
    """File access confined to ``root``."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        os.makedirs(self.root, exist_ok=True)

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

    def read(self, path: str, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        full = self.resolve(path, must_exist=True)
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as e:
            raise SandboxPathError(path, e.strerror or str(e)) from e
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise SandboxPathError(path, "not a regular file")
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise SandboxPathError(path, f"larger than max_bytes={max_bytes}")
        return data

    def write(self, path: str, data: bytes, mode: int = 0o644) -> int:
        full = self.resolve(path)
        parent = os.path.dirname(full)
        if not parent.startswith(self.root):
            raise SandboxPathError(path, "resolves outside the workspace")
        try:
            os.makedirs(parent, exist_ok=True)
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode & 0o777)
        except OSError as e:
            raise SandboxPathError(path, e.strerror or str(e)) from e
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return len(data)

    def list(self, path: str = ".") -> list[dict[str, Any]]:
        full = self.resolve(path, must_exist=True)
        if not os.path.isdir(full):
            raise SandboxPathError(path, "not a directory")
        out = []
        for entry in sorted(os.scandir(full), key=lambda e: e.name):
            st = entry.stat(follow_symlinks=False)
            kind = "dir" if entry.is_dir(follow_symlinks=False) else "link" if entry.is_symlink() else "file"
            out.append({"name": entry.name, "type": kind, "size": st.st_size})
        return out
