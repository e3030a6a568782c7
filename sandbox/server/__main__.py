"""``python -m rockroll.sandbox.server --socket PATH --workspace DIR [--max-sessions N]``."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from rockroll.sandbox.server.app import serve


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m rockroll.sandbox.server", description=__doc__)
    p.add_argument("--socket", default=os.environ.get("ROCKROLL_SOCKET", "/run/rockroll/server.sock"))
    p.add_argument("--workspace", default=os.environ.get("ROCKROLL_WORKSPACE", "/workspace"))
    p.add_argument("--max-sessions", type=int, default=int(os.environ.get("ROCKROLL_MAX_SESSIONS", "16")))
    p.add_argument("--label", action="append", default=[], help="key=value, for finding the process (ignored)")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(args.socket, args.workspace, args.max_sessions)


if __name__ == "__main__":
    main()
