"""Fixtures of the attack tests: a real ``rockroll serve`` with two ordinary owners and an admin.

Each test in this folder performs one attack of a shared server (two ordinary tokens, ``alice``
and ``bob``) and asserts the refusal.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rockroll.api.server.serve_proc import ServerProc
from rockroll.client.sdk import Client
from tests.api.conftest import data_dir, dev_client, make_settings, server  # noqa: F401


@pytest.fixture()
def alice(server: ServerProc) -> Iterator[Client]:  # noqa: F811 - the fixture above
    """Owner alice's client of the shared server."""
    c = Client(server.url, server.tokens["alice"], retries=0)
    yield c
    c.close()
