"""Job logs in files with rotation; the database keeps only each job's tail (issue 13 item 10).

Each job has ``<logs root>/<job id>/job.log`` (its ``ctx.log`` lines, time-stamped) and ``worker.log``
(what its worker process wrote to stdout and stderr). A file is rotated at ``max_bytes`` (one older
``.1`` file is kept), so a job holds at most ``4 * max_bytes`` on disk whatever it prints. The logs
root is the server's, outside every owner's job directory; files are opened without following
symlinks. ``GET /v1/jobs/{id}/logs`` reads the current file's tail (:meth:`JobLogs.read`); the job
record's ``logs`` column holds the last :data:`TAIL_CHARS` characters, written a few times a job, not
at every line (each write of a growing text column is what filled the WAL).
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

__all__ = ["JobLogs", "TAIL_CHARS", "MAX_LINE_CHARS", "MAX_READ_BYTES"]

#: characters of a job's log kept in its database record
TAIL_CHARS = 8_000
#: a longer log line is cut to this many characters
MAX_LINE_CHARS = 4_000
#: most bytes one read of a log answers
MAX_READ_BYTES = 200_000
_JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class JobLogs:
    """Append-only, rotated log files of jobs (see the module docstring)."""

    def __init__(self, root: Path, max_bytes: int = 1_000_000) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    def path(self, job_id: str, name: str = "job.log") -> Path:
        if not _JOB_ID.match(job_id):
            raise ValueError(f"bad job id {job_id!r}")
        return self.root / job_id / name

    def append(self, job_id: str, line: str, name: str = "job.log", *, stamp: bool = True) -> None:
        """Add one line (cut at :data:`MAX_LINE_CHARS`), rotating the file first when it is full."""
        line = line.replace("\r", "").rstrip("\n")[:MAX_LINE_CHARS]
        if stamp:
            line = f"{time.strftime('%H:%M:%S', time.gmtime())} {line}"
        self.write(job_id, (line + "\n").encode(errors="replace"), name)

    def write(self, job_id: str, data: bytes, name: str = "job.log") -> None:
        """Append raw ``data`` to a job's file (rotated at ``max_bytes``)."""
        path = self.path(job_id, name)
        with self._lock:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                if path.stat().st_size + len(data) > self.max_bytes:
                    os.replace(path, path.with_name(name + ".1"))
            except FileNotFoundError:
                pass
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, data[: self.max_bytes])
            finally:
                os.close(fd)

    def read(self, job_id: str, *, tail_lines: int | None = None, name: str = "job.log") -> str | None:
        """The end of a job's current log file (at most :data:`MAX_READ_BYTES`; the last ``tail_lines``
        lines if given), or None when the job has no file here."""
        try:
            fd = os.open(self.path(job_id, name), os.O_RDONLY | os.O_NOFOLLOW)
        except (FileNotFoundError, ValueError):
            return None
        except OSError:  # a symlink (ELOOP) or another surprise: nothing to show
            return None
        with os.fdopen(fd, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - MAX_READ_BYTES))
            data = f.read(MAX_READ_BYTES)
        text = data.decode(errors="replace")
        if size > MAX_READ_BYTES:
            text = text.split("\n", 1)[-1]  # drop the partial first line
        if tail_lines is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-tail_lines:]) if tail_lines > 0 else ""
        return text

    def tail(self, job_id: str, chars: int = TAIL_CHARS) -> str:
        """The last ``chars`` characters of a job's log (what its record keeps)."""
        return (self.read(job_id) or "")[-chars:]

    def remove(self, job_id: str) -> None:
        """Delete a job's log files."""
        d = self.path(job_id).parent
        with self._lock:
            for p in d.glob("*"):
                p.unlink(missing_ok=True)
            if d.exists():
                d.rmdir()
