"""``rockroll image ...``: build and inspect sandbox images.

Mounted in :mod:`rockroll.cli.main` with ``app.add_typer(image_app, name="image")``.
"""

from __future__ import annotations

import json
import logging

import typer

from rockroll.sandbox.base import DEFAULT_IMAGE

__all__ = ["image_app"]

image_app = typer.Typer(help="Build and inspect the sandbox image (works offline).", no_args_is_help=True)


@image_app.command("build")
def build(
    tag: str = typer.Option(DEFAULT_IMAGE, help="Tag of the image to build."),
    base: str = typer.Option(
        "debootstrap", help="Base image (e.g. python:3.11-slim, needs a registry) or 'debootstrap' (offline)."
    ),
    mirror: str = typer.Option("http://deb.debian.org/debian", help="Debian mirror for debootstrap."),
    extra_wheel: list[str] = typer.Option([], help="Extra wheel to install (a custom env package); repeatable."),
    force: bool = typer.Option(False, help="Rebuild even when the image is up to date."),
    docker_host: str = typer.Option("", help="Docker daemon URL (default: DOCKER_HOST or the local socket)."),
) -> None:
    """Build the sandbox image: debootstrap base (offline) + host-built wheels + Dockerfile.

    Example: rockroll image build --extra-wheel dist/my_env-0.1-py3-none-any.whl
    """
    from rockroll.sandbox.errors import SandboxError
    from rockroll.sandbox.images import ImageBuildConfig, build_image

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = ImageBuildConfig(
        tag=tag, base=base, mirror=mirror, extra_wheels=tuple(extra_wheel), force=force, docker_host=docker_host or None
    )
    try:
        typer.echo(build_image(cfg))
    except SandboxError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from e


@image_app.command("status")
def status(tag: str = typer.Option(DEFAULT_IMAGE, help="Image tag.")) -> None:
    """Print whether the image exists and matches the current source tree (JSON); exit 2 when it is stale.

    Example: rockroll image status
    """
    from rockroll.sandbox.errors import SandboxError
    from rockroll.sandbox.images import image_status

    try:
        info = image_status(tag)
    except SandboxError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from e
    typer.echo(json.dumps(info))
    if not info["up_to_date"]:
        raise typer.Exit(2)


if __name__ == "__main__":  # pragma: no cover - `python -m sandbox.cli build` (scripts/setup-docker.sh)
    image_app()
