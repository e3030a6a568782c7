"""Fixtures of the reliability tests: the sandbox image (Docker tests skip only without a daemon).

``docker_image`` comes from :mod:`tests.sandbox.conftest`: it skips when no Docker daemon answers
unless ``ROCKROLL_REQUIRE_DOCKER=1``, in which case it fails.
"""

from __future__ import annotations

from tests.sandbox.conftest import docker_image, make_manager, state_dir

__all__ = ["docker_image", "make_manager", "state_dir"]
