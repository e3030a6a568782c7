"""Issue 13, item 4: a job worker runs unprivileged, confined to its owner's job folder.

On a real ``rockroll serve`` run by root (the interpreter may live in root's 0700 home: pyenv under
``/root``), alice's job worker runs as ``rockroll-sandbox`` under bubblewrap: not uid 0, no
capabilities, ``no_new_privs``, and its view of the job root holds alice's folder only (bob's secret
is not there). The same confinement, given a probe instead of the worker, cannot read ``/etc/shadow``
or bob's folder and can write nowhere on the host but alice's folder. A small real eval job still runs
end to end and writes its report in alice's folder. Where confinement cannot work (not root, no
bubblewrap, no such user) the tests skip, and the server says so in every job's log instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rockroll.api.jobs.identity import find_worker_identity
from rockroll.api.jobs.paths import owner_folder
from rockroll.api.server.serve_proc import ServerProc
from rockroll.client.sdk import Client
from rockroll.sandbox.confine import SANDBOX_USER, sandbox_user
from rockroll.sandbox.confine_worker import worker_argv
from tests.sandbox.conftest import confinement_problem

pytestmark = pytest.mark.skipif(confinement_problem() is not None, reason=f"{confinement_problem()}")

_SECRET = "bob's secret weights"


@pytest.fixture()
def bob_secret(server: ServerProc) -> Path:
    """A file in bob's job folder, owned by the job user as a worker of bob's would leave it."""
    uid, gid = sandbox_user()  # type: ignore[misc]
    jobs = server.data_dir / "jobs"
    bob = jobs / owner_folder("bob")
    bob.mkdir(parents=True, mode=0o700, exist_ok=True)
    os.chmod(jobs, 0o711)
    secret = bob / "secret.txt"
    secret.write_text(_SECRET)
    for p in (bob, secret):
        os.chown(p, uid, gid)
    return secret


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo and len(out) < 64:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in lines if ":" in line)}


def _worker_python(alice: Client, job_id: str) -> int:
    """The worker's interpreter: the python process under the pid the job's log names."""
    python = os.path.realpath(sys.executable)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in alice.job_logs(job_id).splitlines():
            if "worker pid " in line:
                pid = int(line.split("worker pid ")[1].split()[0])
                for p in [pid, *_descendants(pid)]:
                    try:
                        exe = os.path.realpath(f"/proc/{p}/exe")
                        cmd = Path(f"/proc/{p}/cmdline").read_bytes()
                    except OSError:
                        continue
                    if exe == python and b"rockroll.api.jobs.worker" in cmd:
                        return p
        time.sleep(0.2)
    raise AssertionError(f"no worker process found: {alice.job_logs(job_id)}")


def test_the_job_worker_runs_unprivileged_in_its_owners_folder_only(
    alice: Client, server: ServerProc, bob_secret: Path
) -> None:
    uid, _ = sandbox_user()  # type: ignore[misc]
    mine = server.data_dir / "jobs" / owner_folder("alice")
    job = alice.create_job("eval", {"env": "FrozenLake-v0", "episodes": 100_000})
    try:
        pid = _worker_python(alice, job["id"])
        st = _status(pid)
        assert st["Uid"].split() == [str(uid)] * 4 and st["Uid"].split()[0] != "0"
        assert st["CapEff"] == st["CapPrm"] == st["CapBnd"] == "0000000000000000"
        assert st["NoNewPrivs"] == "1"
        assert os.readlink(f"/proc/{pid}/cwd") == str(mine)
        view = Path(f"/proc/{pid}/root")  # the worker's mount namespace, seen from here (root)
        assert sorted(os.listdir(view / str(mine.parent).lstrip("/"))) == [mine.name]
        assert not (view / str(bob_secret).lstrip("/")).exists()
        assert not (view / str(server.data_dir / "rockroll.db").lstrip("/")).exists()
        assert f"runs as {SANDBOX_USER} (uid {uid}), confined by bwrap" in alice.job_logs(job["id"])
    finally:
        alice.cancel_job(job["id"])
    end = alice.wait_job(job["id"], timeout_s=60)
    assert end["state"] == "cancelled", (end, alice.job_logs(job["id"]))


def test_the_workers_confinement_refuses_the_host(server: ServerProc, bob_secret: Path) -> None:
    """The command line the server starts workers with, given a probe: what the worker's user can do."""
    jobs = server.data_dir / "jobs"
    ident, note = find_worker_identity(SANDBOX_USER, jobs)
    assert ident is not None and ident.confined, note
    mine = jobs / owner_folder("alice")
    mine.mkdir(mode=0o700, exist_ok=True)
    os.chown(mine, ident.uid, ident.gid)
    probe = r"""
import json, os
def tries(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return type(e).__name__
out = {"uid": os.getuid(), "euid": os.geteuid(), "groups": os.getgroups()}
out["shadow"] = tries(lambda: open("/etc/shadow").read())
out["bob"] = tries(lambda: open(BOB).read())
out["bob_dir"] = tries(lambda: os.listdir(os.path.dirname(BOB)))
out["db"] = tries(lambda: open(DB).read())
out["etc"] = tries(lambda: open("/etc/rockroll-pwn", "w"))
out["src"] = tries(lambda: open(os.path.join(SRC, "pwn.py"), "w"))
out["mine"] = tries(lambda: open("note.txt", "w").write("hi"))
print(json.dumps(out))
"""
    consts = f"BOB={str(bob_secret)!r}; DB={str(server.data_dir / 'rockroll.db')!r}; SRC={str(Path.cwd())!r}"
    argv = worker_argv([sys.executable, "-c", consts + probe], user=(ident.uid, ident.gid), work_dir=mine, cover=jobs)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["uid"] == got["euid"] == ident.uid != 0 and got["groups"] == []
    assert got["shadow"] == "PermissionError"
    assert got["bob"] == got["bob_dir"] == got["db"] == "FileNotFoundError"  # not in its view at all
    assert got["etc"] in ("PermissionError", "OSError") and got["src"] in ("PermissionError", "OSError")
    assert got["mine"] == "ok" and (mine / "note.txt").stat().st_uid == ident.uid
    assert not Path("/etc/rockroll-pwn").exists() and not (Path.cwd() / "pwn.py").exists()
    assert bob_secret.read_text() == _SECRET


def test_a_confined_job_runs_end_to_end(alice: Client, server: ServerProc) -> None:
    """A model eval (random engine) on sandboxed FrozenLake: it succeeds and writes its report in alice's folder."""
    uid, _ = sandbox_user()  # type: ignore[misc]
    config = {
        "engine": {"kind": "random", "args": {"seed": 0}},
        "envs": [{"env": "FrozenLake-v0", "episodes": 2}],
        "episode": {"max_turns": 5},
        "concurrency": 2,
        "output_dir": "eval-out",
    }
    job = alice.create_job("eval", config)
    done = alice.wait_job(job["id"], timeout_s=120)
    logs = alice.job_logs(job["id"])
    assert done["state"] == "succeeded", (done, logs)
    assert "confined by bwrap" in logs and "warning:" not in logs
    out = server.data_dir / "jobs" / owner_folder("alice") / "eval-out"
    reports = list(out.glob("report*"))
    assert reports, list(out.iterdir()) if out.exists() else "no output folder"
    assert all(r.stat().st_uid == uid for r in reports)
