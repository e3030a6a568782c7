"""A real ``rockroll serve --backend docker``: sessions, a custom env uploaded as source, exec, and
state (the custom env, a user sandbox) that outlives a server restart."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
from rockroll.client.sdk import Client
from rockroll.envs.play import play_episode
from tests.api.test_server import CUSTOM_SOURCE

pytestmark = [pytest.mark.docker, pytest.mark.slow]
IMAGE_TAG = "rockroll-test-api-env:latest"


def _docker_ready() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        out = subprocess.run(["docker", "image", "inspect", "rockroll-sandbox:latest"], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


def _build_env_image(d: Path) -> str:
    """``FROM rockroll-sandbox:latest`` plus one env module on PYTHONPATH (no network needed)."""
    ctx = d / "image"
    ctx.mkdir()
    (ctx / "img_counter.py").write_text(CUSTOM_SOURCE)
    (ctx / "Dockerfile").write_text(
        "FROM rockroll-sandbox:latest\nCOPY img_counter.py /opt/custom/\nENV PYTHONPATH=/opt/custom\n"
    )
    subprocess.run(["docker", "build", "--network", "none", "-q", "-t", IMAGE_TAG, str(ctx)], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    return IMAGE_TAG


def test_docker_backend_end_to_end() -> None:
    if not _docker_ready():
        if os.environ.get("ROCKROLL_REQUIRE_DOCKER") == "1":
            pytest.fail("ROCKROLL_REQUIRE_DOCKER=1 but no Docker daemon or rockroll-sandbox image")
        pytest.skip("needs a Docker daemon and `rockroll image build`")
    d = scratch_dir("docker")
    srv = ServerProc(d, backend="docker")
    token = create_token(srv.db_url, "frank")
    try:
        srv.start(timeout_s=180)
        with Client(srv.url, token) as c:
            assert c.health()["backend"] == "docker"
            with c.env("FrozenLake-v0", is_slippery=False) as env:
                assert play_episode(env, "random", seed=0).steps >= 1
            sb = c.create_sandbox(memory_mb=128)
            out = c.exec(sb["id"], "id -u; cat /proc/1/cgroup >/dev/null; echo ok")
            assert out["exit_code"] == 0 and out["stdout"].splitlines()[0] != "0"
            c.write_file(sb["id"], "note.txt", "kept")
            view = c.register_env(
                "DockCounter-v0",
                kind="source",
                entry_point="dock_counter:Counter",
                source=CUSTOM_SOURCE.encode(),
                source_name="dock_counter.py",
                kwargs={"target": 2},
            )
            assert view["validation"]["sandbox_id"]
            with c.env(view["id"]) as env:  # frank/DockCounter-v0
                assert play_episode(env, "random", seed=0).success
            # kind "image": an image built FROM the sandbox image with the env's module baked in
            image = _build_env_image(d)
            view = c.register_env("ImgCounter-v0", kind="image", image=image, entry_point="img_counter:Counter")
            assert view["image"] == image
            with c.env("frank/ImgCounter-v0", target=1) as env:
                assert play_episode(env, "random", seed=0).steps == 1
            pools = {p["name"] for p in c.overview()["pools"]}
            assert any(name.startswith("env-") for name in pools)
        srv.stop()
        srv.start(timeout_s=180)
        with Client(srv.url, token) as c:
            assert sb["id"] in [s["id"] for s in c.list_sandboxes()]
            assert c.get_sandbox(sb["id"])["owner"] == "frank"
            assert c.exec(sb["id"], "echo again")["stdout"] == "again\n"
            assert c.get_env("frank/DockCounter-v0")["kwargs"] == {"target": 2}
            with c.env("frank/DockCounter-v0") as env:
                obs, _ = env.reset(seed=1)
                assert "target=2" in obs and play_episode(env, "random", seed=1).success
            c.delete_sandbox(sb["id"])
    finally:
        srv.stop()
        from rockroll.api.server.settings import Settings

        name = Settings(database_url=srv.db_url).manager_name()
        subprocess.run(
            f"docker ps -aq --filter label=rockroll.manager={name} | xargs -r docker rm -f",
            shell=True,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(["docker", "rmi", "-f", IMAGE_TAG], capture_output=True, timeout=120)
        shutil.rmtree(d, ignore_errors=True)
