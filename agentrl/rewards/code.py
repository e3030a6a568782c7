"""The ``code`` reward: the response's code runs against the sample's tests in a process sandbox.

``metadata["tests"]`` is a list of Python statements (``assert add(2, 3) == 5``); the answer is the
response's last fenced code block (or the whole response). One run per response: the harness of
:mod:`rockroll.agentrl.rewards.code_harness` goes on stdin to ``python3 -I -`` in a fresh folder of a
sandbox's workspace. Score: the share of tests passed.

Sandboxes come from a :class:`~rockroll.sandbox.manager.SandboxManager` given to it, else the process's
sandbox provider (:mod:`rockroll.sandbox.provider`: inside a control plane's job worker, the server's
sandboxes for the job's owner, at the server's isolation), else a manager of its own (process backend,
held to the minimum isolation a control plane passed on: :mod:`rockroll.sandbox.confinement`): ``sandboxes`` of them, started on first use, each running up to
``runs_per_sandbox`` answers at once. Each has no network (``network=False``: a network namespace
of its own), a memory, pids and CPU limit (cgroups, where the host allows), and the harness caps
file sizes and address space. The run's time limit is the adaptive test-run timeout of
:mod:`rockroll.agentrl.rewards.adaptive_timeout` (RollPacker's rule, per task: ``metadata["task_id"]``, or
the tests' hash), and each test has an alarm of its own (``per_test_s``).

Outcomes: code that loops, sleeps, forks without end, fills the disk or memory, or tries the
network is stopped at its limit and the tests it did not pass score 0 (the agent's failure). Only
a failure of the sandbox itself (it died, did not answer, the harness never started) is infra: the
call raises and the router records an infra failure (the sandbox is replaced by the manager's monitor).

Threat model: see :mod:`rockroll.agentrl.rewards.code_harness` (an answer can game the harness, not
escape the sandbox) and :mod:`rockroll.sandbox.process`. Answers sharing a sandbox run as the same
uid in sibling folders; use ``runs_per_sandbox: 1`` to keep each run alone in its sandbox.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import tempfile
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from rockroll.agentrl.rewards.adaptive_timeout import AdaptiveTimeouts
from rockroll.agentrl.rewards.base import ConfigModel, Reward, RewardResult
from rockroll.agentrl.rewards.code_harness import harness_source, read_report
from rockroll.agentrl.rewards.errors import RewardError
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import CapacityError, SandboxError
from rockroll.sandbox.managed import SandboxState
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.provider import ProvidedSandbox, SandboxProvider, default_provider

__all__ = ["CodeReward", "CodeConfig", "extract_code"]

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(response: str) -> str:
    """The last fenced code block of ``response`` (``python`` or untagged), else the whole response."""
    blocks = _FENCE.findall(response)
    return blocks[-1] if blocks else response


class CodeConfig(ConfigModel):
    sandboxes: int = Field(4, ge=1, le=512, description="Process sandboxes started for test runs.")
    runs_per_sandbox: int = Field(4, ge=1, le=64, description="Test runs one sandbox hosts at once.")
    memory_mb: int = Field(512, ge=64, le=65_536, description="Memory limit of a sandbox (cgroup).")
    pids_limit: int = Field(256, ge=16, le=4096, description="Most processes and threads of a sandbox (cgroup).")
    max_processes: int = Field(
        32,
        ge=4,
        le=4096,
        description="Most processes of the runs' uid in one sandbox (RLIMIT_NPROC; below pids_limit).",
    )
    cpus: float = Field(1.0, gt=0, le=64, description="CPU limit of a sandbox in cores.")
    max_file_mb: int = Field(16, ge=1, le=4096, description="Largest file a run may write (RLIMIT_FSIZE).")
    max_output_bytes: int = Field(200_000, ge=1024, description="Output of a run kept (the rest is dropped).")
    t_max_s: float = Field(10.0, gt=0, description="Time limit of a run before any correct run of its task.")
    t_min_s: float = Field(2.0, gt=0, description="Shortest limit once the task has a correct run.")
    lam: float = Field(2.0, gt=0, description="Limit: lam times the task's longest correct run (RollPacker).")
    per_test_s: float = Field(5.0, gt=0, description="Alarm of one test inside the run.")


class CodeReward(Reward):
    """See the module docstring. ``manager``: sandboxes to use (else one of its own, closed by :meth:`close`)."""

    Config = CodeConfig
    requires = ("tests",)
    config: CodeConfig

    def __init__(self, config: ConfigModel | None = None, *, manager: SandboxProvider | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        self.timeouts = AdaptiveTimeouts(cfg.t_min_s, cfg.lam, cfg.t_max_s)
        self.spec = SandboxSpec(
            name="rlvr-code", memory_mb=cfg.memory_mb, pids_limit=cfg.pids_limit, cpus=cfg.cpus, network=False
        )
        self._own_dir: tempfile.TemporaryDirectory[str] | None = None
        if manager is None:
            manager = default_provider()
        if manager is None:
            self._own_dir = tempfile.TemporaryDirectory(prefix="rr-code-", dir="/tmp")  # short socket paths
            d = self._own_dir.name
            manager = SandboxManager(
                backend="process", name=f"rlvr-{secrets.token_hex(4)}", state_dir=d, db_url=f"sqlite:///{d}/sb.db",
                max_sandboxes=cfg.sandboxes, idle_ttl_s=None, default_spec=self.spec,
            )  # fmt: skip
        self.manager: SandboxProvider = manager
        self._cap = cfg.sandboxes  # lowered to the number held when the provider refuses one more
        self._cond = threading.Condition()
        self._boxes: list[ProvidedSandbox] = []
        self._load: dict[str, int] = {}
        self._starting = 0
        self.counts: Counter[str] = Counter()  # runs, timed_out, oom_killed, infra

    # ------------------------------------------------------------ sandboxes
    def _lease(self) -> ProvidedSandbox:
        cfg = self.config
        with self._cond:
            while True:
                ready = [b for b in self._boxes if b.state == SandboxState.READY or len(self._boxes) == 1]
                free = [b for b in ready if self._load[b.id] < cfg.runs_per_sandbox]
                if free:
                    box = min(free, key=lambda b: self._load[b.id])
                    self._load[box.id] += 1
                    return box
                if len(self._boxes) + self._starting < self._cap:
                    self._starting += 1
                    break
                self._cond.wait()
        try:
            box = self.manager.create(self.spec)
        except CapacityError:  # the owner's quota is reached: share the sandboxes held (if any)
            with self._cond:
                self._starting -= 1
                if not self._boxes:
                    self._cond.notify_all()
                    raise
                self._cap = len(self._boxes)
                self._cond.notify_all()
            return self._lease()
        except BaseException:
            with self._cond:
                self._starting -= 1
                self._cond.notify_all()
            raise
        with self._cond:
            self._starting -= 1
            self._boxes.append(box)
            self._load[box.id] = 1
            self._cond.notify_all()
        return box

    def _give_back(self, box: ProvidedSandbox) -> None:
        with self._cond:
            self._load[box.id] -= 1
            self._cond.notify_all()

    # ------------------------------------------------------------ scoring
    def __call__(self, prompt: str, response: str, metadata: Mapping[str, Any]) -> RewardResult:
        tests = [str(t) for t in metadata["tests"]]
        if not tests:
            raise RewardError("the sample has an empty 'tests' list")
        key = metadata.get("task_id") or hashlib.sha256("\0".join(tests).encode()).hexdigest()[:16]
        limit = self.timeouts.timeout(key)
        nonce, folder = secrets.token_hex(16), f"run-{secrets.token_hex(8)}"
        script = harness_source(
            extract_code(response), tests, nonce=nonce, per_test_s=min(self.config.per_test_s, limit),
            max_file_mb=self.config.max_file_mb, max_memory_mb=self.config.memory_mb,
            max_processes=self.config.max_processes,
        )  # fmt: skip
        box = self._lease()
        try:
            result = box.exec(
                f"mkdir {folder} && cd {folder} && python3 -I -; s=$?; cd .. && rm -rf {folder}; exit $s",
                stdin=script,
                timeout_s=limit,
                max_output=self.config.max_output_bytes,
            )
            if result.timed_out:  # the shell was killed with the run: remove what the run left
                box.exec(["rm", "-rf", folder], timeout_s=30)
        except SandboxError as e:
            self.counts["infra"] += 1
            raise RewardError(f"sandbox {box.id} failed running the tests: {e}") from e
        finally:
            self._give_back(box)
        report = read_report(result.stdout, nonce, len(tests))
        if not report.started and not (result.timed_out or result.oom_killed):
            self.counts["infra"] += 1
            raise RewardError(f"the test harness did not start (exit {result.exit_code}): {result.stderr[-300:]}")
        passed = sum(report.passed.values())
        self.timeouts.observe(key, result.duration_s, passed == len(tests), result.timed_out, limit)
        self.counts.update(runs=1, timed_out=int(result.timed_out), oom_killed=int(result.oom_killed))
        details = {
            "passed": passed, "total": len(tests), "timed_out": result.timed_out, "oom_killed": result.oom_killed,
            "timeout_s": limit, "run_s": result.duration_s,
            "errors": {i: e for i, e in report.errors.items() if e}, "stderr": result.stderr[-500:],
        }  # fmt: skip
        return RewardResult(passed / len(tests), details)

    def close(self) -> None:
        """Stop the sandboxes of its own manager (a given manager is left to its owner)."""
        if self._own_dir is not None:
            if isinstance(self.manager, SandboxManager):
                self.manager.close()
            self._own_dir.cleanup()
            self._own_dir = None
        else:
            for box in self._boxes:
                self.manager.delete(box.id)
        self._boxes.clear()

    def metric_counts(self) -> dict[str, float]:
        """Counters of the runs and the adaptive timeouts (``adaptive_*``, read by ``reward_metrics``)."""
        return {**self.counts, **self.timeouts.snapshot()}
