"""Run a bench's sub-runs as child processes of the same script, a few at a time, each logging to a file."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["run_children"]


def run_children(
    script: str, argv: list[str], names: list[str], log_dir: Path, prefix: str, parallel: int
) -> dict[str, int]:
    """``python script *argv --one NAME`` for each name, ``parallel`` at once, output in ``log_dir/<prefix><name>.log``;
    the exit code of each."""
    log_dir.mkdir(parents=True, exist_ok=True)
    pending, codes = list(names), {}
    live: list[tuple[str, subprocess.Popen[bytes], Any]] = []
    while pending or live:
        while pending and len(live) < parallel:
            name = pending.pop(0)
            log = open(log_dir / f"{prefix}{name}.log", "wb")  # noqa: SIM115 - closed when the run ends
            cmd = [sys.executable, script, *argv, "--one", name]
            live.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
            print(f"started {name}", flush=True)
        time.sleep(2)
        for name, proc, log in list(live):
            if proc.poll() is not None:
                live.remove((name, proc, log))
                log.close()
                codes[name] = proc.returncode
                print(f"{name} ended (exit {proc.returncode})", flush=True)
    return codes
