"""A minimal W3C WebDriver client (httpx) for Debian's chromium + chromium-driver; installs nothing."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

import httpx

__all__ = ["Chromium", "chromium_available"]


def chromium_available() -> bool:
    return bool(shutil.which("chromedriver") and (shutil.which("chromium") or shutil.which("chromium-browser")))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Chromium:
    """Headless Chromium driven through chromedriver (fresh profile, no background traffic)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.profile = tempfile.mkdtemp(prefix="rr-chromium-")
        self.driver = subprocess.Popen(
            [shutil.which("chromedriver") or "chromedriver", f"--port={self.port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=60)
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.http.get("/status").json()["value"]["ready"]:
                    break
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("chromedriver did not start")
            time.sleep(0.1)
        args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-dev-shm-usage",
            f"--user-data-dir={self.profile}",
        ]
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:loggingPrefs": {"browser": "ALL"},
                    "goog:chromeOptions": {
                        "binary": shutil.which("chromium") or shutil.which("chromium-browser"),
                        "args": args,
                    },
                }
            }
        }
        self.session = self._ok(self.http.post("/session", json=caps))["sessionId"]

    @staticmethod
    def _ok(resp: httpx.Response) -> Any:
        body = resp.json()
        if resp.status_code >= 400:
            raise RuntimeError(f"webdriver error: {body}")
        return body["value"]

    def _cmd(self, method: str, path: str, body: dict | None = None) -> Any:
        return self._ok(self.http.request(method, f"/session/{self.session}{path}", json=body))

    def get(self, url: str) -> None:
        self._cmd("POST", "/url", {"url": url})

    def script(self, js: str, *args: Any) -> Any:
        return self._cmd("POST", "/execute/sync", {"script": js, "args": list(args)})

    def find(self, css: str) -> str:
        """The WebDriver id of the first element matching ``css``."""
        found = self._cmd("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(found.values()))

    def click(self, css: str) -> None:
        """Click the first element matching ``css`` (a real mouse click through the driver)."""
        self._cmd("POST", f"/element/{self.find(css)}/click", {})

    def type(self, css: str, text: str) -> None:
        """Type ``text`` into the first element matching ``css`` (real key events)."""
        self._cmd("POST", f"/element/{self.find(css)}/value", {"text": text})

    def console_errors(self) -> list[str]:
        """Browser console messages of level SEVERE since the last call (chromedriver's log)."""
        entries = self._ok(self.http.post(f"/session/{self.session}/se/log", json={"type": "browser"}))
        return [e["message"] for e in entries if e.get("level") == "SEVERE"]

    def text(self, css: str) -> str:
        """The rendered text of the first element matching ``css``."""
        return self.script("return document.querySelector(arguments[0]).innerText;", css)

    def wait_for(self, js: str, timeout_s: float = 30.0) -> Any:
        """Poll a JS expression until it is truthy; return its value."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.script(f"return ({js});")
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {js}")
            time.sleep(0.2)

    def quit(self) -> None:
        try:
            self._cmd("DELETE", "")
        except (RuntimeError, httpx.HTTPError):
            pass
        self.http.close()
        self.driver.kill()
        self.driver.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)
