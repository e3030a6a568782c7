"""``/docs`` works offline (Swagger UI from the installed package) and its "Authorize" takes a bearer token."""

from __future__ import annotations

import os

import httpx
import pytest

from rockroll.api.server.serve_proc import ServerProc
from tests.api.webdriver import Chromium, chromium_available


def test_openapi_declares_the_bearer_scheme_and_docs_use_no_cdn(server: ServerProc) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        spec = http.get("/openapi.json").json()
        scheme = spec["components"]["securitySchemes"]["HTTPBearer"]
        assert scheme["type"] == "http" and scheme["scheme"] == "bearer"
        assert spec["paths"]["/v1/overview"]["get"]["security"] == [{"HTTPBearer": []}]
        assert "security" not in spec["paths"]["/v1/health"]["get"]  # open routes ask for no token
        for page in ("/docs", "/redoc"):
            html = http.get(page).text
            assert "http://" not in html and "https://" not in html, f"{page} loads something from the network"
        for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png"):
            r = http.get(f"/docs/assets/{asset}")
            assert r.status_code == 200 and len(r.content) > 1000, asset
        assert http.get("/docs/assets/..%2Fcore.py").status_code == 404


@pytest.mark.slow
@pytest.mark.skipif(not chromium_available() and not os.environ.get("ROCKROLL_TEST_PG_URL"), reason="needs chromium")
def test_swagger_ui_renders_offline_and_authorize_sends_the_token(server: ServerProc) -> None:
    browser = Chromium()
    try:
        browser.get(f"{server.url}/docs")
        browser.wait_for("document.querySelector('.swagger-ui .info .title')")
        assert "rockroll control plane" in browser.text(".swagger-ui .info .title")
        resources = browser.script("return performance.getEntriesByType('resource').map((e) => e.name)")
        assert resources and all(r.startswith(server.url) for r in resources), resources

        browser.click(".btn.authorize")
        browser.wait_for("document.querySelector('.modal-ux input')")
        browser.type(".modal-ux input", server.tokens["alice"])  # type: ignore[attr-defined]
        browser.click(".modal-ux .auth-btn-wrapper .btn.authorize")
        browser.click(".modal-ux .btn-done")

        op = "#operations-health-overview_v1_overview_get"
        browser.click(f"{op} .opblock-summary-control")
        browser.wait_for(f"document.querySelector('{op} .try-out__btn')")
        browser.click(f"{op} .try-out__btn")
        browser.click(f"{op} .execute")
        status = f"document.querySelector('{op} .live-responses-table tr.response .response-col_status')"
        assert browser.wait_for(f"{status} && {status}.textContent.trim()") == "200"
        body = browser.text(f"{op} .live-responses-table tr.response .response-col_description")
        assert '"owner": "alice"' in body, body
        assert browser.console_errors() == []
    finally:
        browser.quit()
