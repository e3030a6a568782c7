"""A seccomp filter for process sandboxes: the kernel's attack surface that Docker's default profile closes.

Threat model: everything in a process sandbox (the in-sandbox server, env code, the agent's commands)
is untrusted and shares the host's kernel. Confinement (:mod:`rockroll.sandbox.confine`) already takes
away root, capabilities, the network and other sandboxes' files; what is left to an attacker are the
system calls an unprivileged user may still make that are rarely needed and often the way into a
kernel exploit or into a neighbour. This filter answers those with ``EPERM`` and lets the rest
through (an allow-by-default list, like Docker's profile for a container without extra
capabilities):

* inspecting or steering other processes: ``ptrace``, ``process_vm_readv``/``writev``, ``kcmp``,
  ``pidfd_getfd``;
* new namespaces, the usual first step of an unprivileged kernel exploit (a user namespace hands out
  capabilities inside it): ``unshare`` and ``clone`` with any ``CLONE_NEW*`` flag, ``setns``;
  ``clone3`` (whose flags a filter cannot read) answers ``ENOSYS`` so that libc falls back to
  ``clone``, as under Docker;
* mounts and the root: ``mount``, ``umount2``, ``pivot_root``, the new mount API (``fsopen``,
  ``fsmount``, ``move_mount``, ``open_tree``, ...);
* the kernel itself: modules, ``kexec_*``, ``reboot``, ``bpf``, ``perf_event_open``, ``userfaultfd``
  (a tool of race exploits), ``io_uring_*`` (a large, often vulnerable surface that bypasses this
  filter's view of system calls), the keyring (``keyctl``, ``add_key``, ``request_key``), ``swapon``,
  ``acct``, ``quotactl``, ``syslog``, file handles (``open_by_handle_at``, ``name_to_handle_at``);
* ``personality`` except Docker's values (Linux, 32-bit Linux, ``UNAME26`` and the query
  ``0xffffffff``): no turning off address-space randomisation or ``READ_IMPLIES_EXEC``.

Switching users stays allowed (``setuid``, ``setgid``, ``setresuid``, ``setgroups``, ``capset``): the
sandbox's own drop to its user runs under the filter, and a server may switch to agent users.

The filter is compiled by libseccomp (the system's ``libseccomp2``, through Debian's
``python3-seccomp`` or the ``pyseccomp`` package: ``pip install 'rockroll[sandbox]'``, which
``scripts/setup.sh`` installs) into a BPF program that bubblewrap loads (``bwrap --seccomp FD``) just
before it runs the sandbox, after its own set-up. Filters are inherited and cannot be removed.
Where libseccomp or its Python binding is missing, sandboxes still start, without a filter:
:func:`status` says why, and each sandbox handle's ``extra["seccomp"]`` says whether it has one.
``python -m rockroll.sandbox.seccomp_filter`` prints the status and the rules.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
from typing import Any

__all__ = ["DENIED", "NAMESPACE_FLAGS", "PERSONALITIES", "build_filter", "program", "open_program", "status"]

log = logging.getLogger(__name__)

#: system calls answered with EPERM whatever their arguments (names libseccomp does not know are skipped)
DENIED: tuple[str, ...] = (
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # namespaces (unshare and clone are checked by flag below)
    "setns",
    # mounts and the root
    "mount", "umount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick",
    # the kernel and its surfaces
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module",
    "reboot", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "keyctl", "add_key", "request_key", "swapon", "swapoff", "acct", "quotactl",
    "quotactl_fd", "syslog", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "uselib",
    "_sysctl", "nfsservctl", "vm86", "vm86old", "iopl", "ioperm",
)  # fmt: skip

#: ``CLONE_NEW*`` flags: ``unshare`` or ``clone`` with any of them set gets EPERM
NAMESPACE_FLAGS: dict[str, int] = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
_CLONE_NEWTIME = 0x00000080  # unshare only: in clone's flags this bit belongs to the exit signal

#: ``personality`` arguments allowed, as in Docker's profile (PER_LINUX, PER_LINUX32, UNAME26, both, query)
PERSONALITIES: tuple[int, ...] = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)


def _binding() -> Any:
    """libseccomp's Python binding: Debian's ``seccomp`` or PyPI's ``pyseccomp`` (the same API)."""
    try:
        import seccomp

        return seccomp
    except ImportError:
        pass
    import pyseccomp  # raises where libseccomp is missing

    return pyseccomp


def _personality_rules() -> list[tuple[int, int]]:
    """``(mask, value)`` pairs: ``personality(x)`` is refused when ``x & mask == value`` for any pair.

    A rule may compare an argument once, so "not one of :data:`PERSONALITIES`" is spelled as a cycle
    over the 30 other bits, "bit i set and the next one clear": any value with some but not all of
    them set trips one. Values with none set are the four allowed ones; with all set, bit 0 set and
    bit 3 or bit 17 clear trips the last two rules, which leaves only the query ``0xffffffff``.
    """
    free = [b for b in range(32) if not any((p >> b) & 1 for p in PERSONALITIES[:-1])]  # all but bits 3, 17
    rules = [((1 << b) | (1 << free[(i + 1) % len(free)]), 1 << b) for i, b in enumerate(free)]
    rules += [((1 << free[0]) | (1 << b), 1 << free[0]) for b in range(32) if b not in free]
    return rules


def build_filter() -> Any:
    """The filter (a libseccomp ``SyscallFilter``), for this machine's architecture and its 32-bit ones.

    Raises ``ImportError`` or ``OSError`` where libseccomp or its binding is missing.
    """
    sc = _binding()
    deny = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    native = sc.system_arch()
    compat = {sc.Arch.X86_64: (sc.Arch.X86, sc.Arch.X32), sc.Arch.AARCH64: (sc.Arch.ARM,)}
    for arch in compat.get(native, ()):  # 32-bit binaries get the same rules instead of a killed thread
        try:
            f.add_arch(arch)
        except (OSError, ValueError, RuntimeError):
            continue
    for name in DENIED:
        try:
            f.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):  # a name this libseccomp does not know
            log.debug("seccomp: libseccomp does not know %s, left out", name)
    clone_flags = 1 if native in (sc.Arch.S390, sc.Arch.S390X) else 0  # clone(stack, flags) there
    for flag in [*NAMESPACE_FLAGS.values(), _CLONE_NEWTIME]:
        f.add_rule(deny, "unshare", sc.Arg(0, sc.MASKED_EQ, flag, flag))
        if flag != _CLONE_NEWTIME:
            f.add_rule(deny, "clone", sc.Arg(clone_flags, sc.MASKED_EQ, flag, flag))
    try:
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # libc falls back to clone, whose flags we see
    except (OSError, ValueError, RuntimeError):
        pass
    for mask, value in _personality_rules():
        f.add_rule(deny, "personality", sc.Arg(0, sc.MASKED_EQ, mask, value))
    return f


@functools.cache
def _compiled() -> tuple[bytes | None, str]:
    try:
        f = build_filter()
        fd = os.memfd_create("rockroll-seccomp", os.MFD_CLOEXEC)
        try:
            with os.fdopen(os.dup(fd), "wb") as out:  # libseccomp writes to the descriptor itself
                f.export_bpf(out)
            os.lseek(fd, 0, os.SEEK_SET)
            data = b"".join(iter(lambda: os.read(fd, 65536), b""))
        finally:
            os.close(fd)
    except (ImportError, OSError, AttributeError, RuntimeError, ValueError) as e:
        reason = f"off: no libseccomp binding ({type(e).__name__}: {e}); install 'rockroll[sandbox]'"
        log.warning("process sandboxes run without a seccomp filter: %s", reason)
        return None, reason
    return data, "on"


def program() -> bytes | None:
    """The compiled BPF program (built once per process), or None where libseccomp is unavailable."""
    return _compiled()[0]


def status() -> str:
    """``"on"``, or ``"off: <why>"``: what a sandbox started now gets."""
    return _compiled()[1]


def open_program() -> int | None:
    """A fresh descriptor (not close-on-exec, at offset 0) holding :func:`program`, for ``bwrap --seccomp FD``;
    the caller passes it on (``pass_fds``) and closes it. None where there is no program."""
    data = program()
    if data is None:
        return None
    fd = os.memfd_create("rockroll-seccomp", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


if __name__ == "__main__":
    print(f"seccomp filter for process sandboxes: {status()}")
    print("EPERM:", ", ".join(DENIED))
    print("EPERM: unshare/clone with", ", ".join(NAMESPACE_FLAGS), "(unshare also CLONE_NEWTIME); clone3: ENOSYS")
    print("personality allowed:", ", ".join(hex(p) for p in PERSONALITIES))
