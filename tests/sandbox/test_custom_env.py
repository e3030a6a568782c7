"""Custom envs: modules named in ROCKROLL_ENV_MODULES register envs inside the sandbox server."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import docker
import pytest

from rockroll.sandbox.base import SandboxSpec

PLUGINS = os.path.join(os.path.dirname(__file__), "plugins")
ECHO_ENV = (("ROCKROLL_ENV_MODULES", "rr_echo_env"),)


def _play(session: Any) -> list[Any]:
    return [session.reset(seed=3), session.step("<answer>hi</answer>"), session.step("<answer>stop</answer>")]


def test_custom_env_module_in_a_process_sandbox(make_manager: Any) -> None:
    m = make_manager()
    spec = SandboxSpec(name="echo", env=ECHO_ENV + (("PYTHONPATH", PLUGINS),))
    with m.open_session("Echo-v0", spec=spec) as s:
        out = _play(s)
    assert out[1][0] == "echo: hi" and out[2][1:3] == (1.0, True)


@pytest.mark.docker
def test_custom_image_runs_a_custom_env(make_manager: Any, docker_image: str) -> None:
    tag = "rockroll-test-custom:latest"
    client = docker.from_env()
    with tempfile.TemporaryDirectory() as ctx:
        shutil.copy(os.path.join(PLUGINS, "rr_echo_env.py"), ctx)
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write(f"FROM {docker_image}\nCOPY rr_echo_env.py /opt/custom/\nENV PYTHONPATH=/opt/custom\n")
        client.images.build(path=ctx, tag=tag, network_mode="none", rm=True)
    try:
        m = make_manager(backend="docker", default_spec=SandboxSpec(image=docker_image))
        with m.open_session("Echo-v0", spec=SandboxSpec(name="echo", image=tag, env=ECHO_ENV)) as s:
            out = _play(s)
        assert out[1][0] == "echo: hi" and out[2][1:3] == (1.0, True)
        assert m.list()[0].spec.image == tag
    finally:
        m.close()
        client.images.remove(tag, force=True)
