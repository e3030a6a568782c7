"""Small stumbles of the command line (issue 37 item 5, issue 35), each through the real ``rockroll``
console script against a real ``rockroll serve-api``: ids never cut at 80 columns, ``--url`` mistakes
said plainly, ``sandbox exec SB -- cmd``, ``envs list --url`` showing the server's envs, a server id
given to ``play``, ``job metrics`` before any metric, and ``rockroll plot`` saying what it does."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rockroll.api.server.serve_proc import ServerProc
from rockroll.client import Client
from tests.api.test_cli_errors import assert_short, rockroll

NIM = Path(__file__).with_name("nim.py")


@pytest.fixture()
def as_alice(server: ServerProc) -> dict[str, str]:
    return {"ROCKROLL_URL": server.url, "ROCKROLL_TOKEN": server.tokens["alice"]}  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def nim(server: ServerProc) -> str:
    with Client(server.url, server.tokens["alice"]) as c:  # type: ignore[attr-defined]
        return c.register_env("Nim-v0", entry_point="nim:NimEnv", source=NIM, max_steps=6)["id"]


@pytest.fixture()
def model_server_like() -> Iterator[str]:
    """What ``rockroll serve-model`` answers off its routes: /health with a weight version, 404 elsewhere."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            ok = self.path == "/health"
            body = json.dumps({"status": "ok", "weight_version": 0} if ok else {"error": {"code": "not_found"}})
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        do_POST = do_GET  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.mark.slow
def test_ids_are_never_cut_at_80_columns(as_alice: dict[str, str], nim: str) -> None:
    env = {**as_alice, "COLUMNS": "80"}
    sb = rockroll("sandbox", "create", **env).stdout.strip()
    try:
        listed = rockroll("sandbox", "list", **env).stdout
        assert sb in listed and "…" not in listed, listed
        out = rockroll("remote-env", "list", **env).stdout
        assert nim in out and "…" not in out, out
        helps = rockroll("serve-node", "--help", COLUMNS="80").stdout
        assert "--max-sessions-per-sandbox" in helps and "…" not in helps, helps
        # `--` separates the command: `exec: --: not found` before
        out = rockroll("sandbox", "exec", sb, "--", "uname", "-s", **env)
        assert out.returncode == 0 and out.stdout.strip() == "Linux", out
    finally:
        rockroll("sandbox", "rm", sb, **env)


def test_url_mistakes_are_said_plainly(as_alice: dict[str, str], model_server_like: str) -> None:
    token = as_alice["ROCKROLL_TOKEN"]
    bare = as_alice["ROCKROLL_URL"].removeprefix("http://")
    out = rockroll("sandbox", "list", "--url", bare, ROCKROLL_TOKEN=token)
    assert_short(out, "lacks a scheme", f"http://{bare}")
    out = rockroll("sandbox", "list", "--url", as_alice["ROCKROLL_URL"] + "/v1", ROCKROLL_TOKEN=token)
    assert_short(out, "--url takes the server's root", f"Try --url {as_alice['ROCKROLL_URL']}")
    out = rockroll("job", "list", "--url", model_server_like, ROCKROLL_TOKEN=token)
    assert_short(out, "is a model server (`rockroll serve-model`), not the control plane", "serve-api")


def test_server_envs_are_findable(as_alice: dict[str, str], nim: str) -> None:
    out = rockroll("envs", "list", **as_alice)
    assert out.returncode == 0 and nim in out.stdout and "FrozenLake-v0" in out.stdout, out
    out = rockroll("play", nim)  # a server id given to the local player: the hint says where it lives
    assert_short(out, f"No env registered as '{nim}'", "envs list --url")


def test_job_metrics_before_any_metric(as_alice: dict[str, str]) -> None:
    job = rockroll("job", "submit-train", "model.path=no-model", "model.build_tiny=false", **as_alice)
    job_id = job.stdout.strip().splitlines()[0]
    out = rockroll("job", "metrics", job_id, **as_alice)
    assert out.returncode == 0 and out.stdout.startswith(f"no metrics yet: job {job_id} is"), out


def test_plot_says_what_it_does(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    records = [{"step": s, "env/fl/success": s / 4, "time/step": 1.0} for s in range(3)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = rockroll("plot", str(run))
    assert out.returncode == 0 and out.stderr.startswith(f"plotting {run}"), out
    assert (run / "plots" / "env.png").is_file() and str(run / "plots" / "env.png") in out.stdout
