"""Fixtures of the cluster tests: real ``rockroll serve`` and ``rockroll node`` processes on 127.0.0.1."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rockroll.api.server.serve_proc import NodeProc, ServerProc, create_token, scratch_dir

ENV, KWARGS = "FrozenLake-v0", {"size": 4, "is_slippery": False}


@dataclass
class Deployment:
    """A control plane (and maybe a standalone agent) with tokens ``alice``, ``bob`` and ``root`` (admin)."""

    server: ServerProc
    secret: str
    tokens: dict[str, str]
    node: NodeProc | None = None
    data_dir: Path | None = None

    @property
    def url(self) -> str:
        return self.server.url


def wait_for_node(url: str, admin_token: str, node_id: str, timeout_s: float = 30.0) -> dict:
    """The control plane's view of ``node_id`` once it is live (its first heartbeat arrived)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        nodes = httpx.get(f"{url}/v1/nodes", headers={"Authorization": f"Bearer {admin_token}"}).json()["nodes"]
        found = [n for n in nodes if n["id"] == node_id and n["live"]]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"node {node_id} never registered with {url}")


def node_views(url: str, admin_token: str) -> list[dict]:
    """``GET /v1/nodes``: the control plane's view of every node agent."""
    return httpx.get(f"{url}/v1/nodes", headers={"Authorization": f"Bearer {admin_token}"}, timeout=10).json()["nodes"]


def wait_node_view(
    url: str, admin_token: str, node_id: str, ok: Callable[[dict], bool], timeout_s: float = 30.0
) -> dict:
    """The control plane's view of ``node_id`` once ``ok(view)`` holds (views change with heartbeats)."""
    deadline = time.monotonic() + timeout_s
    seen: list[dict] = []
    while time.monotonic() < deadline:
        seen = [n for n in node_views(url, admin_token) if n["id"] == node_id]
        if seen and ok(seen[0]):
            return seen[0]
        time.sleep(0.1)
    raise AssertionError(f"the view of node {node_id} never met the condition in {timeout_s:.0f} s; last: {seen}")


def wait_live_nodes(url: str, admin_token: str, count: int, timeout_s: float = 120.0) -> dict[str, dict]:
    """The live node agents (by id) once ``count`` of them have registered with ``url``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        live = {n["id"]: n for n in node_views(url, admin_token) if n["live"]}
        if len(live) >= count:
            return live
        time.sleep(0.5)
    raise AssertionError(f"{count} node agents never registered with {url}: {node_views(url, admin_token)}")


@contextmanager
def loopback_ray_cluster(workers: int = 2) -> Iterator[tuple[Any, list[Any]]]:
    """A Ray cluster of a head and ``workers`` nodes (1 CPU each), all on 127.0.0.1, and its worker nodes.

    Its files are in a private RAY_TMPDIR (set for this process while it runs), so no other
    ``ray.init`` on this machine finds it; shutting it down ends every actor on it, detached or not.
    """
    from ray import cluster_utils

    ray_tmp = tempfile.mkdtemp(prefix="rr-ray-", dir="/tmp")
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = ray_tmp
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False},
    )
    try:
        added = [cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1") for _ in range(workers)]
        cluster.wait_for_nodes()
        yield cluster, added
    finally:
        cluster.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
        if saved is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = saved


def _deployment(tag: str, *, standalone: bool) -> Iterator[Deployment]:
    d = scratch_dir(tag)
    secret = secrets.token_urlsafe(32)
    secret_file = d / "secret"
    secret_file.write_text(secret)
    extra = ["--cluster-secret-file", str(secret_file)] + (["--no-embedded-node"] if standalone else [])
    server = ServerProc(d, extra=extra)
    tokens = {name: create_token(server.db_url, name, admin=name == "root") for name in ("alice", "bob", "root")}
    dep = Deployment(server, secret, tokens, data_dir=d)
    try:
        server.start()
        if standalone:
            dep.node = NodeProc(d, secret_file, node_id=f"n{secrets.token_hex(4)}", control_plane=server.url)
            dep.node.start()
            wait_for_node(server.url, tokens["root"], dep.node.node_id)
        yield dep
    finally:
        if dep.node is not None:
            dep.node.cleanup()
        server.cleanup()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Deployment]:
    """A control plane without an embedded node and one standalone ``rockroll node`` registered to it."""
    yield from _deployment("cluster", standalone=True)


@pytest.fixture(scope="module")
def embedded() -> Iterator[Deployment]:
    """A default ``rockroll serve``: one machine, its node agent embedded."""
    yield from _deployment("embedded", standalone=False)
