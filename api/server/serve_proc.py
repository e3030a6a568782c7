"""Start and stop a real ``rockroll serve-api`` subprocess (used by the tests and ``bench/dataplane/api_bench.py``)."""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["ServerProc", "NodeProc", "scratch_dir", "create_token", "sandbox_pids", "serve_model_proc"]

ROOT = Path(__file__).resolve().parents[2]
ROCKROLL = [sys.executable, "-m", "rockroll.cli"]


def scratch_dir(tag: str) -> Path:
    """A fresh folder sandboxes can see (the process backend's bwrap hides the host's /tmp)."""
    d = Path.home() / ".cache" / "rockroll-tests" / f"{tag}-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    return d


def create_token(db_url: str, name: str, admin: bool = False) -> str:
    """What ``rockroll token create`` does (the database migrated, a token recorded), in this process.

    Not through the CLI: a fixture makes several tokens, and each CLI start imports every command, over a
    minute on a loaded machine (the CLI's own tests run it).
    """
    from rockroll.api.db import Database
    from rockroll.api.server.auth import create_token as record_token

    db = Database(db_url)
    try:
        db.migrate()
        return record_token(db, name, admin=admin)
    finally:
        db.close()


def _interrupt(proc: subprocess.Popen[str] | None) -> None:
    """SIGINT ``proc`` and wait for it; SIGKILL its process group after 30 s."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class ServerProc:
    """One ``rockroll serve-api`` subprocess on a free port; ``start()``/``stop()`` can be repeated."""

    def __init__(
        self,
        data_dir: Path,
        *,
        backend: str = "process",
        db_url: str | None = None,
        dev: bool = False,
        extra: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.env = env or {}  # set in the server's environment (settings: ROCKROLL_<FIELD>)
        self.db_url = db_url or f"sqlite:///{data_dir}/rockroll.db"
        self.backend = backend
        self.dev = dev
        self.extra = extra or []
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.lines: list[str] = []

    def start(self, timeout_s: float = 90.0) -> str:
        """Start the server and return its URL once it listens."""
        cmd = ROCKROLL + [
            "serve-api",
            "--port",
            "0",
            "--backend",
            self.backend,
            "--db",
            self.db_url,
            "--sandbox-state-dir",
            str(self.data_dir / "sb"),
            "--dev" if self.dev else "--no-dev",
            *self.extra,
        ]
        env = {**os.environ, **self.env}
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env, start_new_session=True
        )
        found: queue.Queue[str] = queue.Queue()

        stdout = self.proc.stdout

        def pump() -> None:
            for line in stdout or ():
                self.lines.append(line)
                if line.startswith("rockroll listening on "):
                    found.put(line.split()[-1])

        threading.Thread(target=pump, daemon=True).start()
        try:
            self.url = found.get(timeout=timeout_s)
        except queue.Empty:
            self.stop()
            raise RuntimeError("rockroll serve-api did not start:\n" + "".join(self.lines[-50:])) from None
        return self.url

    def stop(self, *, kill_sandboxes: bool = False) -> None:
        """Stop the server (SIGINT, then SIGKILL); its sandboxes stay up for the next start."""
        _interrupt(self.proc)
        self.proc = None

    def log(self) -> str:
        return "".join(self.lines)

    def cleanup(self) -> None:
        """Stop the server and every sandbox process it left behind, then remove the folder."""
        self.stop()
        sb_dir = self.data_dir / "sb"
        if sb_dir.exists():
            for pid_dir in sb_dir.glob("*/*"):
                _kill_sandbox(pid_dir)
        shutil.rmtree(self.data_dir, ignore_errors=True)


class NodeProc:
    """One ``rockroll serve-node`` subprocess (a standalone node agent) on a free port."""

    def __init__(
        self,
        data_dir: Path,
        secret_file: Path,
        *,
        node_id: str = "n1",
        control_plane: str = "",
        max_sandboxes: int = 4,
        max_sessions_per_sandbox: int = 64,
    ) -> None:
        self.limits = [
            "--max-sandboxes",
            str(max_sandboxes),
            "--max-sessions-per-sandbox",
            str(max_sessions_per_sandbox),
        ]
        self.data_dir, self.secret_file, self.node_id, self.control_plane = (
            data_dir,
            secret_file,
            node_id,
            control_plane,
        )
        self.state_dir = data_dir / f"node-{node_id}"
        self.proc: subprocess.Popen[str] | None = None
        self.endpoint = ""
        self.lines: list[str] = []

    def start(self, timeout_s: float = 90.0) -> str:
        """Start the agent and return its endpoint once it listens."""
        cmd = ROCKROLL + ["serve-node", "--id", self.node_id, "--cluster-secret-file", str(self.secret_file)]
        cmd += ["--state-dir", str(self.state_dir), *self.limits]
        cmd += ["--control-plane", self.control_plane] if self.control_plane else []
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, start_new_session=True
        )
        found: queue.Queue[str] = queue.Queue()
        stdout = self.proc.stdout

        def pump() -> None:
            for line in stdout or ():
                if len(self.lines) < 10_000:  # a long run's log stays bounded
                    self.lines.append(line)
                if line.startswith(f"rockroll node {self.node_id} serving "):
                    found.put(line.split()[-1])

        threading.Thread(target=pump, daemon=True).start()
        try:
            self.endpoint = found.get(timeout=timeout_s)
        except queue.Empty:
            self.stop()
            raise RuntimeError("rockroll serve-node did not start:\n" + "".join(self.lines[-50:])) from None
        return self.endpoint

    def stop(self) -> None:
        """SIGINT (the agent closes its sessions and sandboxes), then SIGKILL."""
        _interrupt(self.proc)
        self.proc = None

    def cleanup(self) -> None:
        """Stop the agent and anything left that names its state folder."""
        self.stop()
        for pid in sandbox_pids(self.label) + sandbox_pids(str(self.state_dir)):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.state_dir, ignore_errors=True)

    @property
    def label(self) -> str:
        """The label on the command line of each of its sandbox servers."""
        return f"rockroll.manager=node-{self.node_id}"


def sandbox_pids(needle: str) -> list[int]:
    """Processes (other than this one) whose command line contains ``needle`` (a folder, a manager label)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmdline:
            pids.append(int(proc.name))
    return pids


def _kill_sandbox(sandbox_dir: Path) -> None:
    """Kill the server processes whose command line names this sandbox folder."""
    needle = str(sandbox_dir)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmdline and int(proc.name) != os.getpid():
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.05)


@contextmanager
def serve_model_proc(
    model_dir: Path, name: str = "tiny", args: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """``rockroll serve-model MODEL_DIR --port 0 --model-name NAME ARGS`` on 127.0.0.1 (one OMP thread unless
    ``env`` says otherwise); yields its root URL (the port it named) and the process, stopped on exit."""
    import httpx

    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    cmd = [*ROCKROLL, "serve-model", str(model_dir), "--port", "0", "--model-name", name, *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    out = proc.stdout
    assert out is not None

    def pump() -> None:  # drains the output, so the server never blocks on a full pipe
        for line in out:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    url = ""
    deadline = time.monotonic() + 120
    try:
        while not url:  # --port 0: the server names the port it bound
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve-model named no port in 120 s: {''.join(seen)[-2000:]}")
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                if proc.poll() is not None:
                    raise RuntimeError(f"serve-model exited: {''.join(seen)[-2000:]}") from None
                continue
            found = re.search(r"serving .* on (http://127\.0\.0\.1:(\d+))/v1", seen[-1])
            if found:
                assert found.group(2) != "0", seen[-1]
                url = found.group(1)
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve-model exited: {''.join(seen)[-2000:]}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("serve-model did not come up in 120 s")
            time.sleep(0.3)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
