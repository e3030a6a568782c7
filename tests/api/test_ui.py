"""The env-health page in headless Chromium: loads, lists a live sandbox, shows a restart after a kill."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from rockroll.api.client import Client
from rockroll.api.serve_proc import ServerProc
from tests.api.webdriver import Chromium, chromium_available


@pytest.fixture(autouse=True)
def _need_chromium() -> None:
    if not chromium_available():
        if os.environ.get("ROCKROLL_TEST_PG_URL"):  # scripts/setup-ci-services.sh ran: chromium must be there
            pytest.fail("scripts/setup-ci-services.sh ran but chromium/chromedriver are missing")
        pytest.skip("needs chromium + chromium-driver (scripts/setup-ci-services.sh)")


def _kill_sandbox_server(sandbox_id: str) -> int:
    """SIGKILL the in-sandbox server processes of ``sandbox_id`` behind the manager's back."""
    killed = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"rockroll.sandbox.server" in cmd and f"rockroll.sandbox={sandbox_id}".encode() in cmd:
            os.kill(int(proc.name), signal.SIGKILL)
            killed += 1
    return killed


def test_page_lists_sandbox_and_shows_restart(server: ServerProc) -> None:
    with Client(server.url, server.tokens["alice"]) as c:
        sb = c.create_sandbox()["id"]
        browser = Chromium()
        try:
            browser.get(f"{server.url}/ui?token={server.tokens['alice']}")
            browser.wait_for("document.body.dataset.loaded === '1'")
            assert "env health" in browser.script("return document.title")
            row = f"document.querySelector('td[data-sandbox={json.dumps(sb)}]')"
            browser.wait_for(row)
            assert browser.script(f"return {row}.parentElement.children[1].textContent") == "ready"
            assert "FrozenLake-v0" in browser.text("#envs")
            assert "user" in browser.text("#pools")  # alice's sandbox is in the "user" pool
            assert _kill_sandbox_server(sb) >= 1
            # the monitor notices, replaces the sandbox under the same id, and the page refreshes itself
            restarts = f"{row} && {row}.parentElement.children[6].textContent"
            assert browser.wait_for(
                f"{restarts} === '1' && {row}.parentElement.children[1].textContent === 'ready'", timeout_s=60
            )
        finally:
            browser.quit()
        assert c.get_sandbox(sb)["restarts"] == 1
        c.delete_sandbox(sb)
