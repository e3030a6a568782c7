"""Fixtures of the attack tests: a real ``rockroll serve`` with two ordinary owners and an admin.

Each test in this folder performs one attack of a shared server (two ordinary tokens, ``alice``
and ``bob``) and asserts the refusal.
"""

from __future__ import annotations

from tests.api.conftest import data_dir, dev_client, make_settings, server  # noqa: F401
