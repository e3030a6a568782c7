"""Issue 13, item 11: a confined process sandbox runs under a seccomp filter.

Each attack runs inside a real confined process sandbox (root, bubblewrap, the ``rockroll-sandbox``
user, cgroups) as an agent's command would: ``ctypes`` calls straight into the kernel to attach to
and read another process of the sandbox (``ptrace``, ``process_vm_readv``), to make a user namespace
(``unshare``, ``clone``, util-linux ``unshare -U``: the usual first step of a kernel exploit), to
reach the keyring, io_uring, ``userfaultfd``, ``bpf``, ``perf_event_open``, file handles and
``setns``, and to turn off address-space randomisation (``personality``, ``setarch -R``). Before the
filter most of these worked (the rest failed for other reasons, with other errors); each must now
get ``EPERM``, while ordinary work (threads, subprocesses, pipes, the personality query) goes on.

The tests skip without root, bubblewrap and the user, or without libseccomp's Python binding, and
fail instead where ``ROCKROLL_REQUIRE_DOCKER=1`` says the set-up ran (CI: ``scripts/setup.sh``
installs the binding).
"""

from __future__ import annotations

import errno
import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from rockroll.sandbox import seccomp_filter
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.confine import SANDBOX_USER
from rockroll.sandbox.process import ProcessBackend
from tests.sandbox.conftest import confinement_problem, skip_or_fail

CALLS = (
    "ptrace", "process_vm_readv", "unshare", "clone", "clone3", "keyctl", "add_key", "io_uring_setup",
    "userfaultfd", "bpf", "perf_event_open", "name_to_handle_at", "setns", "mount", "personality",
    "setresuid",
)  # fmt: skip

#: run in the sandbox with the host's syscall numbers; prints {attack: errno, 0 when it worked}
ATTACKS = r"""
import ctypes, json, os, sys, time
nr = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr[name]), *[ctypes.c_ulong(a) for a in args])
    return (0 if r >= 0 else ctypes.get_errno()), r

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

out = {}
secret = ctypes.create_string_buffer(b"the victim's secret", 64)
victim = os.fork()  # a process of the same user: the same addresses, nothing but the filter in the way
if victim == 0:
    time.sleep(60)
    os._exit(0)
try:
    out["ptrace"] = call("ptrace", 0x4206, victim, 0, 0)[0]  # PTRACE_SEIZE: attach without stopping it
    got = ctypes.create_string_buffer(64)
    local, remote = iovec(ctypes.addressof(got), 19), iovec(ctypes.addressof(secret), 19)
    out["process_vm_readv"] = call("process_vm_readv", victim, ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0)[0]
    out["read_victim"] = got.value.decode(errors="replace")
finally:
    os.kill(victim, 9)
    os.waitpid(victim, 0)
err, child = call("clone", 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD: a fork into a user namespace
if child == 0:
    os._exit(0)
if child > 0:
    os.waitpid(child, 0)
out["clone_user"] = err
out["unshare_user"] = call("unshare", 0x10000000)[0]
out["keyctl"] = call("keyctl", 1, 0)[0]  # KEYCTL_JOIN_SESSION_KEYRING: a new session keyring
key = [ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value for b in (b"user", b"k", b"v")]
out["add_key"] = call("add_key", *key, 1, (1 << 64) - 2)[0]  # into KEY_SPEC_PROCESS_KEYRING
params = ctypes.create_string_buffer(120)
out["io_uring_setup"] = call("io_uring_setup", 1, ctypes.addressof(params))[0]
out["userfaultfd"] = call("userfaultfd", 1)[0]  # UFFD_USER_MODE_ONLY: open to unprivileged users
out["bpf"] = call("bpf", 0, 0, 0)[0]
out["perf_event_open"] = call("perf_event_open", 0, 0, (1 << 64) - 1, (1 << 64) - 1, 0)[0]
out["name_to_handle_at"] = call("name_to_handle_at", (1 << 64) - 100, 0, 0, 0, 0)[0]
out["setns"] = call("setns", (1 << 64) - 1, 0)[0]
out["mount"] = call("mount", 0, 0, 0, 0, 0)[0]
out["no_aslr"] = call("personality", 0x0040000)[0]  # ADDR_NO_RANDOMIZE
out["read_implies_exec"] = call("personality", 0x0400000)[0]
print(json.dumps(out))
"""

#: ordinary work under the filter; prints what it saw
ORDINARY = r"""
import ctypes, json, os, subprocess, sys, threading
nr = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
seen = []
t = threading.Thread(target=lambda: seen.append("thread"))
t.start(); t.join()
seen.append(subprocess.run("echo piped | tr a-z A-Z", shell=True, capture_output=True, text=True).stdout.strip())
ctypes.set_errno(0)
seen.append(libc.syscall(ctypes.c_long(nr["personality"]), ctypes.c_ulong(0xFFFFFFFF)) >= 0)  # the query
ctypes.set_errno(0)
seen.append(libc.syscall(ctypes.c_long(nr["clone3"]), ctypes.c_ulong(0), ctypes.c_ulong(0)) == -1 and ctypes.get_errno())
minus1 = ctypes.c_ulong((1 << 64) - 1)
seen.append(libc.syscall(ctypes.c_long(nr["setresuid"]), minus1, minus1, minus1))  # switching users stays allowed
with open("note", "w") as f:
    f.write("ok")
seen.append(open("note").read())
print(json.dumps(seen))
"""


def _numbers() -> dict[str, int]:
    sc = seccomp_filter._binding()
    return {name: sc.resolve_syscall(sc.system_arch(), name) for name in CALLS}


def _start(backend: ProcessBackend) -> Any:
    sid = f"sc{uuid.uuid4().hex[:6]}"
    spec = SandboxSpec(name="seccomp", memory_mb=256, pids_limit=64, cpus=1.0)
    handle = backend.start(sid, spec, labels={"rockroll.manager": f"m{sid}", "rockroll.sandbox": sid})
    try:
        backend.wait_ready(handle, 120)
    except BaseException:
        backend.stop(handle)
        raise
    return handle


@pytest.fixture(scope="module")
def state() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="rr-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def sandbox(state: str) -> Iterator[tuple[ProcessBackend, Any]]:
    """A confined process sandbox, with the filter."""
    problem = confinement_problem()
    if problem:
        skip_or_fail(f"process confinement: {problem}")
    if seccomp_filter.status() != "on":
        skip_or_fail(f"seccomp filter: {seccomp_filter.status()}")
    backend = ProcessBackend(state_dir=state, user=SANDBOX_USER)
    handle = _start(backend)
    try:
        yield backend, handle
    finally:
        backend.stop(handle)


def test_the_sandbox_says_it_has_a_filter(sandbox: tuple[ProcessBackend, Any]) -> None:
    backend, h = sandbox
    assert h.extra["seccomp"] == "on"
    r = backend.exec(h, ["grep", "^Seccomp:", "/proc/self/status"])
    assert r.stdout.split() == ["Seccomp:", "2"], r  # 2: a filter (not the exit code: the server's race with coreutils)


def test_kernel_attack_surface_answers_eperm(sandbox: tuple[ProcessBackend, Any]) -> None:
    backend, h = sandbox
    r = backend.exec(h, ["python3", "-c", ATTACKS, json.dumps(_numbers())], timeout_s=60)
    assert r.exit_code == 0, r
    got = json.loads(r.stdout)
    assert got.pop("read_victim") == "", "read another process's memory"
    assert got == {name: errno.EPERM for name in got}, got


def test_tools_that_make_namespaces_or_turn_off_aslr_fail(sandbox: tuple[ProcessBackend, Any]) -> None:
    backend, h = sandbox
    for cmd in ("unshare -U true", "unshare -Ur id", "setarch -R true", "setarch --addr-no-randomize true"):
        r = backend.exec(h, cmd, timeout_s=30)
        assert r.exit_code != 0, (cmd, r)
        assert "Operation not permitted" in r.stderr, (cmd, r)


def test_ordinary_work_goes_on_under_the_filter(sandbox: tuple[ProcessBackend, Any]) -> None:
    backend, h = sandbox
    r = backend.exec(h, ["python3", "-c", ORDINARY, json.dumps(_numbers())], timeout_s=60)
    assert r.exit_code == 0, r
    assert json.loads(r.stdout) == ["thread", "PIPED", True, errno.ENOSYS, 0, "ok"]


def test_without_libseccomp_a_sandbox_starts_and_says_it_has_no_filter(
    state: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = confinement_problem()
    if problem:
        skip_or_fail(f"process confinement: {problem}")

    def missing() -> Any:
        raise ImportError("No module named 'pyseccomp'")

    monkeypatch.setattr(seccomp_filter, "_binding", missing)
    seccomp_filter._compiled.cache_clear()
    try:
        backend = ProcessBackend(state_dir=state, user=SANDBOX_USER)
        h = _start(backend)
        try:
            assert h.extra["seccomp"].startswith("off: no libseccomp binding"), h.extra
            r = backend.exec(h, ["grep", "^Seccomp:", "/proc/self/status"], timeout_s=30)
            assert r.stdout.split() == ["Seccomp:", "0"], r
            unshare = "import ctypes; libc = ctypes.CDLL(None, use_errno=True); print(libc.unshare(0x10000000))"
            r = backend.exec(h, ["python3", "-c", unshare])
            assert r.exit_code == 0 and r.stdout == "0\n", r  # what the filter refuses
        finally:
            backend.stop(h)
    finally:
        seccomp_filter._compiled.cache_clear()
