"""The test harness the ``code`` reward runs in a sandbox (:mod:`rockroll.agentrl.rewards.code`), and its report reader.

The harness is one Python script fed on stdin to ``python3 -I -`` (nothing is written for it): it
caps file sizes (``RLIMIT_FSIZE``), address space (``RLIMIT_AS``) and the processes of its
uid (``RLIMIT_NPROC``: a fork bomb stops there, below the sandbox's pids limit, so the sandbox's
server keeps room for its threads), keeps a private copy of its
stdout and sends the answer's own stdout to ``/dev/null``, loads the answer's code, then runs each
test (a Python statement, usually an ``assert``) under a per-test alarm, and reports one line per
test, prefixed by a random nonce: ``<nonce> ready``, ``<nonce> <i> <1|0> <error json>``. Lines
without the nonce (the answer printing ``PASS``) are ignored; a test without a line (the run was
killed) failed.

Threat model: the answer runs in the same interpreter as the harness, so an answer written to
game it (finding the nonce in memory, patching the harness) can fake passes; the sandbox, not the
harness, is what keeps it from the host (see :mod:`rockroll.sandbox.process`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

__all__ = ["harness_source", "read_report", "Report"]

_TEMPLATE = r"""
import json, os, resource, signal, sys
_N, _SOLUTION, _TESTS, _PER_TEST_S = {nonce!r}, {solution!r}, {tests!r}, {per_test_s!r}
for _lim, _v in ((resource.RLIMIT_FSIZE, {fsize}), (resource.RLIMIT_AS, {address_space}), (resource.RLIMIT_NPROC, {nproc})):
    if _v > 0:
        resource.setrlimit(_lim, (_v, _v))
_out = os.fdopen(os.dup(1), "w", buffering=1)
_null = os.open(os.devnull, os.O_WRONLY)
os.dup2(_null, 1)
sys.stdout = open(os.devnull, "w")
def _report(i, ok, err):
    _out.write(_N + " " + str(i) + " " + ("1" if ok else "0") + " " + json.dumps(err[:300]) + "\n")
    _out.flush()
def _alarm(signum, frame):
    raise TimeoutError("test took longer than %gs" % _PER_TEST_S)
signal.signal(signal.SIGALRM, _alarm)
_out.write(_N + " ready\n")
_out.flush()
_g = {{"__name__": "solution"}}
try:
    signal.setitimer(signal.ITIMER_REAL, _PER_TEST_S)
    exec(compile(_SOLUTION, "solution.py", "exec"), _g)
    signal.setitimer(signal.ITIMER_REAL, 0)
except BaseException as _e:
    signal.setitimer(signal.ITIMER_REAL, 0)
    for _i in range(len(_TESTS)):
        _report(_i, False, "the code did not load: %s: %s" % (type(_e).__name__, _e))
    os._exit(0)
for _i, _t in enumerate(_TESTS):
    try:
        signal.setitimer(signal.ITIMER_REAL, _PER_TEST_S)
        exec(compile(_t, "test_%d" % _i, "exec"), _g)
        signal.setitimer(signal.ITIMER_REAL, 0)
        _report(_i, True, "")
    except BaseException as _e:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _report(_i, False, "%s: %s" % (type(_e).__name__, _e))
_out.flush()
os._exit(0)
"""


def harness_source(
    solution: str,
    tests: list[str],
    *,
    nonce: str,
    per_test_s: float,
    max_file_mb: int,
    max_memory_mb: int,
    max_processes: int,
) -> str:
    """The harness script for ``solution`` and ``tests`` (see the module docstring)."""
    return _TEMPLATE.format(
        nonce=nonce,
        solution=solution,
        tests=list(tests),
        per_test_s=float(per_test_s),
        fsize=max_file_mb * 1024 * 1024,
        address_space=max_memory_mb * 1024 * 1024,
        nproc=max_processes,
    )


@dataclass
class Report:
    """What a run's stdout says: whether the harness started, and each reported test's outcome."""

    started: bool = False
    passed: dict[int, bool] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)


def read_report(stdout: str, nonce: str, n_tests: int) -> Report:
    """The nonce-marked lines of ``stdout``; other lines (the answer's) are ignored."""
    rep = Report()
    for line in stdout.splitlines():
        head, _, rest = line.partition(" ")
        if head != nonce:
            continue
        if rest == "ready":
            rep.started = True
            continue
        idx, _, rest = rest.partition(" ")
        ok, _, err = rest.partition(" ")
        if not idx.isdigit() or int(idx) >= n_tests or int(idx) in rep.passed:
            continue
        rep.passed[int(idx)] = ok == "1"
        try:
            rep.errors[int(idx)] = str(json.loads(err)) if err else ""
        except ValueError:
            rep.errors[int(idx)] = err
    return rep
