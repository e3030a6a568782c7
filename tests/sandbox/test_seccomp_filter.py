"""The seccomp filter builder (rockroll.sandbox.seccomp_filter): its rules, its program, its fallback.

The attacks through a real confined sandbox are in tests/security/test_seccomp.py; here the filter is
loaded into a plain child process and probed call by call.
"""

from __future__ import annotations

import errno
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator

import pytest

from rockroll.sandbox import seccomp_filter
from rockroll.sandbox.confine import confined_argv
from rockroll.sandbox.seccomp_filter import PERSONALITIES, _personality_rules


@pytest.fixture
def compiled() -> bytes:
    if seccomp_filter.status() != "on":
        if os.environ.get("ROCKROLL_REQUIRE_DOCKER") == "1":  # the set-up ran: the binding must be there
            pytest.fail(f"seccomp filter: {seccomp_filter.status()}")
        pytest.skip(seccomp_filter.status())
    data = seccomp_filter.program()
    assert data is not None
    return data


@pytest.fixture
def no_binding(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def missing() -> None:
        raise ImportError("No module named 'pyseccomp'")

    monkeypatch.setattr(seccomp_filter, "_binding", missing)
    seccomp_filter._compiled.cache_clear()
    yield
    seccomp_filter._compiled.cache_clear()


def _refused(value: int) -> bool:
    return any(value & mask == want for mask, want in _personality_rules())


def test_personality_rules_refuse_exactly_what_dockers_profile_does() -> None:
    rng = random.Random(0)
    values = {1 << b for b in range(32)} | {(1 << a) | (1 << b) for a in range(32) for b in range(32)}
    values |= {0xFFFFFFFF ^ (1 << b) for b in range(32)} | {rng.getrandbits(32) for _ in range(20_000)}
    values |= set(PERSONALITIES) | {0x0040000, 0x0400000, 0x0100000, 0xFFFFFFF7, 0xFFFDFFFF, 0xFFFDFFF7}
    wrong = [hex(v) for v in sorted(values) if _refused(v) != (v not in PERSONALITIES)]
    assert wrong == []


def test_confined_argv_loads_the_program_in_bwrap_before_the_drop() -> None:
    kw = dict(sandbox_dir="/x", user=(999, 999), workspace_mb=64, cgroup_procs=[], readable=set())
    without = confined_argv(["srv"], **kw)  # type: ignore[arg-type]
    assert "--seccomp" not in without
    argv = confined_argv(["srv"], seccomp_fd=7, **kw)  # type: ignore[arg-type]
    i = argv.index("--seccomp")
    assert argv[i + 1] == "7" and argv.index("bwrap") < i < argv.index("--", i) < argv.index("setpriv")


def test_the_program_is_compiled_once_and_handed_out_on_fresh_descriptors(compiled: bytes) -> None:
    assert seccomp_filter.status() == "on" and len(compiled) % 8 == 0 and len(compiled) > 8  # sock_filter
    assert seccomp_filter.program() is compiled
    fds = [seccomp_filter.open_program() for _ in range(2)]
    try:
        assert all(fd is not None and os.get_inheritable(fd) for fd in fds)  # bwrap must see it
        assert fds[0] != fds[1]
        for fd in fds:
            assert fd is not None and os.read(fd, len(compiled) + 1) == compiled
    finally:
        for fd in fds:
            if fd is not None:
                os.close(fd)


#: load the filter into this (child) process, then probe the kernel; prints what each call gave
PROBE = r"""
import ctypes, errno, json, subprocess, threading
from rockroll.sandbox.seccomp_filter import build_filter, _binding, PERSONALITIES
sc = _binding()
nr = lambda name: sc.resolve_syscall(sc.system_arch(), name)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr(name)), *[ctypes.c_ulong(a) for a in args])
    return 0 if r >= 0 else ctypes.get_errno()
build_filter().load()
out = {"unshare_user": call("unshare", 0x10000000), "unshare_net": call("unshare", 0x40000000)}
out["unshare_files"] = call("unshare", 0x400)  # CLONE_FILES: no namespace, allowed
out["clone3"] = call("clone3", 0, 0)
out["ptrace"] = call("ptrace", 0, 0, 0, 0)  # PTRACE_TRACEME
out["keyctl"] = call("keyctl", 0, 0)
out["setresuid"] = call("setresuid", (1 << 64) - 1, (1 << 64) - 1, (1 << 64) - 1)
out["getgroups"] = call("getgroups", 0, 0)
out["personality"] = {hex(v): call("personality", v) for v in (*PERSONALITIES, 0x0040000, 0x0400000, 0xFFFFFFF7, 1)}
seen = []
t = threading.Thread(target=lambda: seen.append("thread")); t.start(); t.join()
seen.append(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())
out["ordinary"] = seen
print(json.dumps(out))
"""


def test_the_filter_refuses_in_a_real_process_and_lets_ordinary_calls_through(compiled: bytes) -> None:
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    perm = errno.EPERM
    assert got.pop("personality") == {
        "0x0": 0, "0x8": 0, "0x20000": 0, "0x20008": 0, "0xffffffff": 0,
        "0x40000": perm, "0x400000": perm, "0xfffffff7": perm, "0x1": perm,
    }  # fmt: skip
    assert got == {
        "unshare_user": perm, "unshare_net": perm, "unshare_files": 0, "clone3": errno.ENOSYS, "ptrace": perm,
        "keyctl": perm, "setresuid": 0, "getgroups": 0, "ordinary": ["thread", "child"],
    }  # fmt: skip


def test_without_the_binding_there_is_no_filter_and_the_status_says_why(no_binding: None) -> None:
    assert seccomp_filter.program() is None and seccomp_filter.open_program() is None
    assert seccomp_filter.status().startswith("off: no libseccomp binding (ImportError")
