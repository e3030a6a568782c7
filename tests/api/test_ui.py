"""The env-health page in headless Chromium against a real server: summary, tables, restarts, job plots."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from rockroll.api.server.serve_proc import ServerProc
from rockroll.client.sdk import Client
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


def _page_counts(browser: Chromium, dl: str) -> dict[str, str]:
    return browser.script(
        "return Object.fromEntries([...document.querySelectorAll(arguments[0] + ' dd')]"
        ".map((d) => [d.dataset.key, d.textContent]));",
        f"#{dl}",
    )


def _counts_match(browser: Chromium, c: Client) -> bool:
    """Whether the page's summary shows what the API's own lists say now."""
    sandboxes, sessions = c.list_sandboxes(), c.list_sessions()
    by_state = {k: str(v) for k, v in Counter(s["state"] for s in sandboxes).items()}
    by_env = {k: str(v) for k, v in Counter(s["env"] for s in sessions).items()}
    nodes = _page_counts(browser, "by-node")
    return (
        browser.text("#n-sandboxes") == str(len(sandboxes))
        and browser.text("#n-sessions") == str(len(sessions))
        and _page_counts(browser, "by-state") == by_state
        and _page_counts(browser, "by-env") == by_env
        and sum(int(v.split()[0]) for v in nodes.values()) == len(sandboxes)
        and sum(int(v.split("·")[1].split()[0]) for v in nodes.values()) == len(sessions)
    )


@pytest.mark.slow
def test_page_summary_sessions_restarts_and_job_plots(server: ServerProc) -> None:
    alice = Client(server.url, server.tokens["alice"])
    root = Client(server.url, server.tokens["root"])
    browser = Chromium()
    try:
        sb = alice.create_sandbox()["id"]
        opened = [alice.create_session("FrozenLake-v0"), alice.create_session("FrozenLake-v0")]
        opened.append(root.create_session("Sokoban-v0"))
        job = root.create_job("eval", {"env": "FrozenLake-v0", "episodes": 6, "policy": "random"})

        browser.get(f"{server.url}/ui?token={server.tokens['root']}")
        browser.wait_for("document.body.dataset.loaded === '1'")
        assert "env health" in browser.script("return document.title")
        assert browser.console_errors() == []

        # the summary shows what the API lists (polled: the warm pool may still be filling)
        deadline = time.monotonic() + 30
        while not _counts_match(browser, root):
            assert time.monotonic() < deadline, "the page's summary never matched the API"
            time.sleep(0.5)
        assert _page_counts(browser, "by-env")["Sokoban-v0"] == "1"

        # the sessions table lists every open session with its env and sandbox
        for s in opened:
            cell = f"document.querySelector('td[data-session={json.dumps(s['id'])}]')"
            browser.wait_for(cell)
            row = browser.script(f"return [...{cell}.parentElement.children].map((td) => td.textContent)")
            assert row[1] == s["env"] and row[3] == s["sandbox_id"]

        # a killed sandbox: its restart and the reason are listed within 5 s
        assert _kill_sandbox_server(sb) >= 1
        t0 = time.monotonic()
        restarted = f"document.querySelector('td[data-restarted={json.dumps(sb)}]')"
        browser.wait_for(restarted, timeout_s=5)
        assert time.monotonic() - t0 <= 5.5
        reason = browser.script(f"return {restarted}.parentElement.lastElementChild.textContent")
        assert reason.startswith("dead"), reason
        row = f"document.querySelector('td[data-sandbox={json.dumps(sb)}]')"
        browser.wait_for(
            f"{row} && {row}.parentElement.children[6].textContent === '1'"
            f" && {row}.parentElement.children[1].textContent === 'ready'",
            timeout_s=60,
        )
        assert alice.get_sandbox(sb)["restarts"] == 1
        assert alice.overview()["restarts"][0]["reason"] == reason  # alice sees her sandbox's restart too
        assert not Client(server.url, server.tokens["bob"]).overview()["restarts"]  # bob sees no one else's

        # the job's metrics are plotted from every report it made
        assert root.wait_job(job["id"], timeout_s=120)["state"] == "succeeded"
        history = root.request("GET", f"/v1/jobs/{job['id']}/metrics")["points"]
        assert len(history) >= 6 and [p["metrics"]["episodes"] for p in history][:6] == [1, 2, 3, 4, 5, 6]
        fig = f"document.querySelector('div[data-job={json.dumps(job['id'])}] figure[data-metric=episodes]')"
        browser.wait_for(f"{fig} && {fig}.dataset.points === '{len(history)}'", timeout_s=10)
        assert browser.script(f"return {fig}.querySelector('polyline').points.length") == len(history)
        assert browser.console_errors() == []
    finally:
        browser.quit()
        for s in root.list_sessions():  # an admin lists everyone's
            root.close_session(s["id"])
        for s in alice.list_sandboxes():
            alice.delete_sandbox(s["id"])
        alice.close()
        root.close()
