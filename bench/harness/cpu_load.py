"""Keep N processes busy for a bounded time, to run the test suite beside it on a loaded machine.

    .venv/bin/python bench/harness/cpu_load.py --procs 2 --seconds 3600 &
    bash scripts/test.sh tests/cluster

Each worker spins on arithmetic (no memory, no disk, no network) until ``--seconds`` have passed,
then exits; the parent exits once they have. SIGINT or SIGTERM to the parent stops them all at once.
A run of the suite beside two busy processes on a two-core machine is how ``tests/cluster`` is
checked against the timing of a machine shared with training runs (``scripts/test.sh``).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import sys
import time

__all__ = ["spin", "main"]

MAX_SECONDS = 6 * 3600.0  # a forgotten load generator still stops by itself


def spin(seconds: float, nice: int = 0) -> int:
    """Busy-loop for ``seconds`` (monotonic clock); returns how many rounds it made."""
    if nice:
        os.nice(nice)
    deadline = time.monotonic() + seconds
    rounds, x = 0, 1
    while time.monotonic() < deadline:
        for _ in range(10_000):
            x = (x * 1_103_515_245 + 12_345) & 0x7FFFFFFF
        rounds += 1
    return rounds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=int, default=os.cpu_count() or 1, help="busy processes (default: one per core)")
    p.add_argument("--seconds", type=float, default=600.0, help=f"how long they spin (at most {MAX_SECONDS:.0f})")
    p.add_argument("--nice", type=int, default=0, help="niceness of the busy processes (0: compete evenly)")
    args = p.parse_args(argv)
    if not 1 <= args.procs <= 256:
        p.error("--procs must be between 1 and 256")
    if not 0 < args.seconds <= MAX_SECONDS:
        p.error(f"--seconds must be above 0 and at most {MAX_SECONDS:.0f}")
    ctx = mp.get_context("fork")
    workers = [ctx.Process(target=spin, args=(args.seconds, args.nice), daemon=True) for _ in range(args.procs)]
    for w in workers:
        w.start()

    def stop(signum: int, _frame: object) -> None:
        for w in workers:
            if w.is_alive():
                w.terminate()
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    print(f"cpu_load: {args.procs} busy processes for {args.seconds:.0f} s (pid {os.getpid()})", flush=True)
    for w in workers:
        w.join(args.seconds + 30)
        if w.is_alive():
            w.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
