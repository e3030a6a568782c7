"""Where a job may read and write: its owner's job directory (issue 13 item 4).

Threat model: a job config is untrusted input that the control plane acts on. Every path it names is
resolved here, in the control plane, before the job is queued (and again before it runs):

* a relative path resolves inside the owner's job directory (``<job_root>/<owner folder>/``); ``..``
  segments are refused, and so is a path whose resolved form (symlinks followed) leaves that folder;
* an absolute path is refused, except an existing one inside an admin's read-only model folder
  (``Settings.job_model_dirs``) where the field only reads a model (``model.path``, an engine's
  ``model_path`` and ``tokenizer``); a model the trainer would build there is refused;
* ``config_path`` may also name a config shipped with the server (``configs/NAME.yaml`` or
  ``NAME.yaml``) when the owner's folder has no such file;
* any other string of the config that looks like a path (absolute, ``~``, ``..``) is refused, and a URL
  must match ``Settings.job_engine_urls`` (:mod:`rockroll.api.jobs.urls`);
* env kwargs (:func:`check_env_kwargs`) go to the env in its sandbox, and to a local replica of it in the
  worker (an expert's, the trainer's first look), so a path among them (``catalog_path``) would tell
  whether a file exists: a string that looks like a path outside the owner's folder (absolute, ``~``,
  ``..``, or one resolving out of it through a symlink) is refused with the same answer whether anything
  is there or not (nothing is looked up but the owner's own links); their URLs are the env's business
  (its sandbox's network), not checked here.

The answer is the job's *effective* config: the validated config with every path absolute and inside
the owner's folder. The job worker runs that, never the text the caller sent. Refusals raise
:class:`JobPathError` naming the dotted key (the API answers 422).

One folder per owner, not per job: a model trained by one job (``runs/NAME/export/final``) is the
``model.path`` of the owner's next one. Owners are kept apart by the folder name (a slug plus a hash of
the owner's name, so no two owners share one).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from rockroll.api.jobs.urls import check_url
from rockroll.api.server.errors import RockrollError

__all__ = [
    "JobDirs", "JobPathError", "confine", "config_file", "owner_folder", "check_strings", "check_env_kwargs",
    "SERVER_CONFIGS",
]  # fmt: skip

#: configs shipped with the server (``rockroll job submit-train --server-config NAME``)
SERVER_CONFIGS = Path(__file__).resolve().parents[2] / "configs"
_SLUG = re.compile(r"[^A-Za-z0-9_-]+")
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


class JobPathError(RockrollError):
    """A path of a job config that leaves its owner's job directory (``key``: the dotted field)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def owner_folder(owner: str) -> str:
    """The folder name of ``owner``: a readable slug plus a hash of the whole name (distinct per owner)."""
    slug = _SLUG.sub("_", owner)[:32].strip("_") or "owner"
    return f"{slug}-{hashlib.sha256(owner.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class JobDirs:
    """The job folders of one server: ``root/<owner folder>/`` per owner, plus read-only model folders."""

    root: Path
    model_dirs: tuple[Path, ...] = ()
    server_configs: Path = SERVER_CONFIGS
    logs: Path = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).resolve())
        object.__setattr__(self, "model_dirs", tuple(Path(d).expanduser().resolve() for d in self.model_dirs))
        object.__setattr__(self, "logs", self.root / ".logs")  # the server's: never inside an owner's folder

    def owner_dir(self, owner: str) -> Path:
        """The job directory of ``owner`` (not created)."""
        return self.root / owner_folder(owner)

    def ensure(self, owner: str) -> Path:
        """The job directory of ``owner``, created (the root is traversable only, log folders private)."""
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)
        self.logs.mkdir(mode=0o700, exist_ok=True)
        d = self.owner_dir(owner)
        d.mkdir(mode=0o700, exist_ok=True)
        return d


def _inside(path: Path, base: Path) -> bool:
    return path == base or base in path.parents


def _looks_absolute(text: str) -> bool:
    return text.startswith(("/", "~", "\\")) or bool(_DRIVE.match(text))


def _has_dotdot(text: str) -> bool:
    return ".." in re.split(r"[\\/]", text)


def confine(base: Path, value: Any, key: str, *, read_dirs: Sequence[Path] = ()) -> Path:
    """``value`` resolved inside ``base`` (or, absolute and existing, inside one of ``read_dirs``).

    Raises :class:`JobPathError` naming ``key`` for a non-text value, an absolute path outside
    ``read_dirs``, a ``..`` segment, or a path whose resolved form (symlinks followed) leaves ``base``.
    """
    if not isinstance(value, str) or "\0" in value:
        raise JobPathError(key, f"{key} must be a path (text), got {value!r}")
    if _looks_absolute(value):
        real = Path(os.path.expanduser(value)).resolve()
        for d in read_dirs:
            if _inside(real, d) and real.exists() and not _has_dotdot(value):
                return real
        where = " (or an existing one inside a folder the admin shares read-only)" if read_dirs else ""
        raise JobPathError(key, f"{key} must be a path relative to your job directory{where}, not {value!r}")
    if _has_dotdot(value):
        raise JobPathError(key, f"{key} must stay inside your job directory: {value!r} has a '..' segment")
    base = base.resolve()
    real = (base / PurePosixPath(value.replace("\\", "/"))).resolve()
    if not _inside(real, base):
        raise JobPathError(key, f"{key} {value!r} leads out of your job directory (through a symlink)")
    return real


def config_file(dirs: JobDirs, owner_dir: Path, value: Any) -> Path:
    """``config_path``: a file of the owner's folder, else a config shipped with the server by its name."""
    path = confine(owner_dir, value, "config_path", read_dirs=(dirs.server_configs.resolve(),))
    if path.is_file():
        return path
    name = str(value).removeprefix("configs/")
    shipped = dirs.server_configs / name
    if "/" not in name and "\\" not in name and shipped.is_file():
        return shipped.resolve()
    raise FileNotFoundError(f"config_path {value!r}: no such file in your job directory, nor a server config")


def check_strings(data: Any, key: str, *, skip: Sequence[str], engine_urls: Sequence[str]) -> None:
    """Refuse any string under ``data`` that looks like a path (absolute, ``~``, ``..``) or is a URL the
    allowlist refuses. ``skip``: dotted keys left alone (``*`` matches one list index or key)."""
    if any(_matches(key, pattern) for pattern in skip):
        return
    if isinstance(data, dict):
        for k, v in data.items():
            check_strings(v, f"{key}.{k}" if key else str(k), skip=skip, engine_urls=engine_urls)
    elif isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            check_strings(v, f"{key}.{i}", skip=skip, engine_urls=engine_urls)
    elif isinstance(data, str):
        if "://" in data:
            check_url(data, engine_urls, key)
        elif _looks_absolute(data) or _has_dotdot(data) or "\0" in data:
            raise JobPathError(
                key, f"{key} {data!r} looks like a path outside your job directory; job configs name files "
                "relative to it",
            )  # fmt: skip


def check_env_kwargs(data: Any, key: str, base: Path) -> None:
    """Refuse any string under the env kwargs ``data`` that names a path outside ``base`` (the owner's folder):
    absolute, ``~``, ``..``, a NUL, or relative but resolving out of ``base`` through a symlink. The message
    never depends on whether the path exists (see the module docstring)."""
    if isinstance(data, dict):
        for k, v in data.items():
            check_env_kwargs(v, f"{key}.{k}", base)
    elif isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            check_env_kwargs(v, f"{key}.{i}", base)
    elif isinstance(data, str) and "://" not in data:
        if _looks_absolute(data) or _has_dotdot(data) or "\0" in data or not _stays_in(base, data):
            raise JobPathError(
                key, f"{key} {data!r} looks like a path outside your job directory; env kwargs may name files "
                "relative to it only",
            )  # fmt: skip


def _stays_in(base: Path, text: str) -> bool:
    if not text.strip() or len(text) > 4096:
        return True  # not a path the owner could have linked (too long for one: the env refuses it)
    base = base.resolve()
    try:
        real = (base / PurePosixPath(text.replace("\\", "/"))).resolve()
    except (OSError, ValueError, RuntimeError):
        return False
    return _inside(real, base)


def _matches(key: str, pattern: str) -> bool:
    parts, want = key.split("."), pattern.split(".")
    return len(parts) == len(want) and all(w in ("*", p) for p, w in zip(parts, want, strict=True))
