"""Image building helpers and the ``rockroll image`` command."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rockroll.cli.image import image_app
from rockroll.sandbox.images import DOCKERFILE, ImageBuildConfig, source_hash


def test_dockerfile_is_shipped_and_defaults_to_python_slim() -> None:
    text = DOCKERFILE.read_text()
    assert "ARG BASE=python:3.11-slim" in text and "--no-index" in text and "USER ${UID}" in text


def test_source_hash_tracks_the_sources(tmp_path: object) -> None:
    assert source_hash() == source_hash() and len(source_hash()) == 16
    assert ImageBuildConfig().base == "debootstrap"


@pytest.mark.docker
def test_image_build_is_idempotent_and_status_reports_it(docker_image: str) -> None:
    result = CliRunner().invoke(image_app, ["build", "--tag", docker_image])  # up to date: fast no-op
    assert result.exit_code == 0 and docker_image in result.output
    result = CliRunner().invoke(image_app, ["status", "--tag", docker_image])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output.strip().splitlines()[-1])
    assert info["exists"] and info["up_to_date"] and info["source_hash"] == source_hash()
    result = CliRunner().invoke(image_app, ["status", "--tag", "rockroll-no-such-image:x"])
    assert result.exit_code == 2 and json.loads(result.output)["exists"] is False
