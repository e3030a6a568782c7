"""Building the sandbox image, online or fully offline.

``build_image()`` does three things, each skipped when already done:

0. nothing at all when the image exists and carries the current ``rockroll.source_hash`` label
   (a hash of ``envs/``, ``envhub/``, ``sandbox/`` and ``pyproject.toml``): a changed env rebuilds.
1. **base image**: with ``base="debootstrap"`` (the default when ``python:3.11-slim`` cannot be
   pulled), ``debootstrap --variant=minbase --include=python3 bookworm`` into a temporary
   directory, then ``docker import`` as ``rockroll-base:bookworm`` (about a minute, needs only a
   Debian mirror, which ``apt-get`` already uses). Otherwise any base with Python 3.11.
2. **wheels**: rockroll itself (``pip wheel --no-deps .``) plus the server's runtime dependencies
   (numpy, gymnasium, bm25s, and websockets and orjson for the data-plane channel, pinned to the
   versions installed on the host) and pip, built or copied from
   the host's pip cache. Nothing is fetched from inside a container (HTTPS from containers may fail
   certificate checks behind proxies).
3. **image**: ``sandbox/image/Dockerfile`` with ``BASE`` set, built with ``network_mode="none"``;
   inside, pip runs from its own wheel with ``--no-index``.

Custom env images work the same way: any image whose command runs ``python -m rockroll.sandbox.server
--socket /run/rockroll/s.sock --workspace /workspace`` (build ``FROM rockroll-sandbox:latest`` and
add your env package, or pass ``extra_wheels``/``runtime_packages``).

Threat model: builds run on the host with the user's rights; only local files enter the image.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rockroll.sandbox.base import DEFAULT_IMAGE
from rockroll.sandbox.errors import BackendUnavailable, SandboxError

__all__ = [
    "ImageBuildConfig",
    "ImageBuildError",
    "build_image",
    "ensure_base_image",
    "build_wheels",
    "source_hash",
    "image_status",
    "DOCKERFILE",
    "DEBOOTSTRAP_BASE",
]

log = logging.getLogger(__name__)
DOCKERFILE = Path(__file__).parent / "image" / "Dockerfile"
DEBOOTSTRAP_BASE = "rockroll-base:bookworm"
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class ImageBuildError(SandboxError, RuntimeError):
    """A step of the image build failed (its output is in the message)."""


@dataclass(frozen=True)
class ImageBuildConfig:
    """What to build.

    Attributes:
        tag: the image's tag.
        base: a base image (``python:3.11-slim``...) or ``debootstrap`` (offline Debian base).
        suite: Debian suite for debootstrap (its python3 must match the host's minor version).
        mirror: Debian mirror for debootstrap.
        runtime_packages: what the server needs besides rockroll (versions pinned to the host's).
        extra_wheels: more wheel files to install (a custom env package, ...).
        project_dir: the rockroll source tree to wheel.
        force: rebuild even when the image exists.
        docker_host: Docker daemon URL (None: the environment's default).
    """

    tag: str = DEFAULT_IMAGE
    base: str = "debootstrap"
    suite: str = "bookworm"
    mirror: str = "http://deb.debian.org/debian"
    # what envs/ imports (bm25s: WebShop), and the data-plane channel's (rockroll.sandbox.server.channel)
    # websockets and orjson, so Docker sandboxes are stepped over the channel like process ones
    runtime_packages: tuple[str, ...] = ("numpy", "gymnasium", "bm25s", "websockets", "orjson")
    extra_wheels: tuple[str, ...] = ()
    project_dir: str = str(PROJECT_ROOT)
    force: bool = False
    docker_host: str | None = None
    uid: int = 10001
    env: dict[str, str] = field(default_factory=dict)


def _docker(host: str | None):  # noqa: ANN202 - docker.DockerClient, imported lazily
    try:
        import docker

        client = docker.DockerClient(base_url=host) if host else docker.from_env()
        client.ping()
        return client
    except Exception as e:  # noqa: BLE001 - any failure to reach the daemon
        raise BackendUnavailable(
            f"no Docker daemon reachable ({e}); start dockerd or run scripts/setup-docker.sh"
        ) from e


def _has_image(client, tag: str, source_hash: str | None = None) -> bool:  # noqa: ANN001
    """Whether ``tag`` exists (and, given ``source_hash``, was built from that source)."""
    import docker.errors

    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    if source_hash is None:
        return True
    return (image.labels or {}).get("rockroll.source_hash") == source_hash


def source_hash(project_dir: str = str(PROJECT_ROOT)) -> str:
    """A hash of the Python sources that go into the image (a changed env means a rebuild)."""
    h = hashlib.sha256()
    root = Path(project_dir)
    files = [root / "pyproject.toml", DOCKERFILE]
    for pkg in ("envs", "envhub", "sandbox"):  # what runs in the image (the server, its plugins, the envs)
        files += sorted((root / pkg).rglob("*.py"))
    for f in files:
        if f.is_file() and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(root) if f.is_relative_to(root) else f.name).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageBuildError(
            f"{' '.join(argv[:4])} ... failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
        )
    return proc.stdout


def ensure_base_image(cfg: ImageBuildConfig, client=None) -> str:  # noqa: ANN001
    """Make the debootstrap base image if missing; return its tag."""
    client = client or _docker(cfg.docker_host)
    if _has_image(client, DEBOOTSTRAP_BASE) and not cfg.force:
        return DEBOOTSTRAP_BASE
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap is not installed: apt-get install -y debootstrap")
    with tempfile.TemporaryDirectory(prefix="rockroll-rootfs-") as tmp:
        root = os.path.join(tmp, "root")
        log.info("debootstrap %s into %s (about a minute)", cfg.suite, root)
        _run(["debootstrap", "--variant=minbase", "--include=python3", cfg.suite, root, cfg.mirror])
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
            shutil.rmtree(os.path.join(root, junk), ignore_errors=True)
        tarball = os.path.join(tmp, "rootfs.tar")
        _run(["tar", "-C", root, "-cf", tarball, "."])
        repo, _, tag = DEBOOTSTRAP_BASE.partition(":")
        client.api.import_image_from_file(tarball, repository=repo, tag=tag)
    return DEBOOTSTRAP_BASE


def _pinned(packages: tuple[str, ...]) -> list[str]:
    pins = []
    for name in packages:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(name)
    return pins


def build_wheels(cfg: ImageBuildConfig, out: str) -> list[str]:
    """Wheels of rockroll, its server runtime deps and pip into ``out``; returns the file names."""
    pip = [sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "-q", "-w", out]
    _run(pip + ["--no-deps", cfg.project_dir])
    _run(pip + _pinned(("pip",) + tuple(cfg.runtime_packages)))
    for whl in cfg.extra_wheels:
        shutil.copy(whl, out)
    return sorted(os.listdir(out))


def build_image(cfg: ImageBuildConfig | None = None) -> str:
    """Build the sandbox image (see the module docstring); returns its tag. Idempotent."""
    cfg = cfg or ImageBuildConfig()
    client = _docker(cfg.docker_host)
    src = source_hash(cfg.project_dir)
    if _has_image(client, cfg.tag, src) and not cfg.force:
        log.info("image %s is up to date (source %s)", cfg.tag, src)
        return cfg.tag
    base = ensure_base_image(cfg, client) if cfg.base == "debootstrap" else cfg.base
    with tempfile.TemporaryDirectory(prefix="rockroll-image-") as ctx:
        wheels = os.path.join(ctx, "wheels")
        os.makedirs(wheels)
        build_wheels(cfg, wheels)
        shutil.copy(DOCKERFILE, os.path.join(ctx, "Dockerfile"))
        runtime = " ".join(cfg.runtime_packages) + "".join(
            " " + Path(w).name.split("-")[0].replace("_", "-") for w in cfg.extra_wheels
        )
        import docker.errors

        try:
            client.images.build(
                path=ctx,
                tag=cfg.tag,
                buildargs={"BASE": base, "UID": str(cfg.uid), "RUNTIME_PACKAGES": runtime},
                network_mode="none",
                rm=True,
                forcerm=True,
                labels={"rockroll.image": "sandbox", "rockroll.source_hash": src},
            )
        except (docker.errors.BuildError, docker.errors.APIError) as e:
            logs = "".join(str(c.get("stream", c.get("error", ""))) for c in getattr(e, "build_log", []) or [])
            raise ImageBuildError(f"docker build of {cfg.tag} failed: {e}\n{logs[-4000:]}") from e
    return cfg.tag


def image_status(tag: str = DEFAULT_IMAGE, docker_host: str | None = None) -> dict[str, object]:
    """Whether ``tag`` exists and is up to date with the source tree (for ``rockroll image status``)."""
    client = _docker(docker_host)
    src = source_hash()
    return {
        "tag": tag,
        "exists": _has_image(client, tag),
        "up_to_date": _has_image(client, tag, src),
        "source_hash": src,
    }
