"""The env catalog the API serves: built-in envs from ``envhub`` plus custom envs from the database.

Custom envs are registered through ``POST /v1/envs`` in one of three kinds:

* ``entry_point``: a ``module:Class`` already installed in the sandbox image;
* ``image``: a Docker image that runs the in-sandbox server and knows the entry point;
* ``source``: an uploaded single module (``.py``) or pure-Python wheel (``.whl``), stored in the
  database and put on ``sys.path`` only inside sandboxes.

The control plane never imports custom env code itself: :meth:`CustomEnv.files` is what the
placement writes into each sandbox of the env's own pool (a manifest plus the upload), and
:mod:`rockroll.sandbox.server.plugins` registers it there.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

import rockroll.envhub as envhub
from rockroll.api.auth import Principal
from rockroll.api.db import Database, EnvRecord
from rockroll.api.errors import ApiError

__all__ = ["CustomEnv", "Catalog", "KINDS"]

KINDS = ("entry_point", "image", "source")
_SOURCE_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.py$|^[A-Za-z0-9_.\-]+\.whl$")


@dataclass
class CustomEnv:
    """A custom env spec as stored (``source`` holds the uploaded bytes)."""

    env_id: str
    kind: str
    owner: str
    entry_point: str = ""
    image: str = ""
    source_name: str = ""
    source: bytes | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_steps: int | None = None
    description: str = ""
    tags: list[str] = field(default_factory=list)
    created_at: float = field(default_factory=time.time)

    def public(self) -> dict[str, Any]:
        """The JSON view of this env (without the source bytes), keys in the order of :func:`builtin_view`."""
        name, version = envhub.parse_env_id(self.env_id)
        return {
            "id": self.env_id,
            "name": name,
            "version": version or 0,
            "kind": self.kind,
            "builtin": False,
            "owner": self.owner,
            "entry_point": self.entry_point,
            "kwargs": copy.deepcopy(self.kwargs),
            "max_steps": self.max_steps,
            "description": self.description,
            "tags": list(self.tags),
            "image": self.image,
            "source_name": self.source_name,
            "source_bytes": len(self.source or b""),
            "created_at": self.created_at,
        }

    def manifest(self) -> dict[str, Any]:
        """What :mod:`rockroll.sandbox.server.plugins` needs to register this env inside a sandbox."""
        paths = []
        if self.kind == "source":
            paths = [self.source_name] if self.source_name.endswith(".whl") else ["."]
        return {
            "id": self.env_id,
            "entry_point": self.entry_point,
            "kwargs": self.kwargs,
            "max_steps": self.max_steps,
            "paths": paths,
        }

    def files(self) -> dict[str, bytes]:
        """The plugin files of this env, relative to the sandbox's plugin folder."""
        folder = self.env_id.replace("/", "_")
        out = {f"{folder}/manifest.json": json.dumps(self.manifest()).encode()}
        if self.kind == "source" and self.source is not None:
            out[f"{folder}/{self.source_name}"] = self.source
        return out

    def fingerprint(self) -> str:
        """Changes whenever the env's code or spec changes (names its sandbox pool)."""
        h = hashlib.sha256(json.dumps(self.manifest(), sort_keys=True).encode())
        h.update(self.source or b"")
        h.update(self.image.encode())
        return h.hexdigest()[:10]


def builtin_view(spec: envhub.EnvSpec) -> dict[str, Any]:
    """The JSON view of a built-in env."""
    return {
        "id": spec.id,
        "name": spec.name,
        "version": spec.version,
        "kind": "builtin",
        "builtin": True,
        "owner": "rockroll",
        "entry_point": spec.entry_point if isinstance(spec.entry_point, str) else "",
        "kwargs": _jsonable(spec.kwargs),
        "max_steps": spec.max_steps,
        "description": spec.description,
        "tags": list(spec.tags),
        "image": "",
        "source_name": "",
        "source_bytes": 0,
        "created_at": 0.0,
    }


def _jsonable(v: Any) -> Any:
    return json.loads(json.dumps(v, default=list))


class Catalog:
    """Built-in plus custom envs; custom ones persist in the database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._custom: dict[str, CustomEnv] = {}
        self._lock = threading.Lock()
        self.load()

    # ------------------------------------------------------------ reading
    def load(self) -> None:
        """Read every custom env from the database."""
        with self.db.session() as s:
            rows = list(s.scalars(select(EnvRecord)))
        with self._lock:
            self._custom = {r.env_id: _from_record(r) for r in rows}

    def list(self, tag: str | None = None) -> list[dict[str, Any]]:
        """Every env (built-in and custom), sorted by id."""
        out = {s.id: builtin_view(s) for s in envhub.list_envs()}
        out.update({e.env_id: e.public() for e in self._custom.values()})
        return [v for _, v in sorted(out.items()) if tag is None or tag in v["tags"]]

    def custom(self, env_id: str) -> CustomEnv | None:
        """The custom env behind ``env_id`` (newest version when none is given), or None."""
        name, version = envhub.parse_env_id(env_id)
        matches = [e for e in self._custom.values() if envhub.parse_env_id(e.env_id)[0] == name]
        if version is not None:
            matches = [e for e in matches if envhub.parse_env_id(e.env_id)[1] == version]
        return max(matches, key=lambda e: envhub.parse_env_id(e.env_id)[1] or 0) if matches else None

    def get(self, env_id: str) -> dict[str, Any]:
        """The JSON view of one env; raises ``UnknownEnvError`` with suggestions."""
        found = self.custom(env_id)
        if found is not None:
            return found.public()
        try:
            return builtin_view(envhub.spec(env_id))
        except envhub.UnknownEnvError as e:
            import difflib

            ids = [v["id"] for v in self.list()]
            raise envhub.UnknownEnvError(env_id, difflib.get_close_matches(env_id, ids, n=3, cutoff=0.5)) from e

    def resolve(self, env_id: str) -> str:
        """The full versioned id ``env_id`` refers to."""
        return self.get(env_id)["id"]

    # ------------------------------------------------------------ writing
    def check_new(self, env: CustomEnv) -> None:
        """Raise ``ApiError`` when ``env`` cannot be registered as given."""
        name, version = envhub.parse_env_id(env.env_id)
        if version is None:
            raise ApiError(400, "invalid_env_spec", f"env id {env.env_id!r} needs a version suffix, e.g. '{name}-v0'")
        try:
            envhub.spec(env.env_id)
            taken = True
        except envhub.UnknownEnvError:
            taken = env.env_id in self._custom
        if taken:
            raise ApiError(409, "env_exists", f"{env.env_id} is already registered; bump the version (-v{version + 1})")
        if env.kind not in KINDS:
            raise ApiError(400, "invalid_env_spec", f"kind must be one of {', '.join(KINDS)}")
        if not re.match(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$", env.entry_point):
            raise ApiError(400, "invalid_env_spec", f"entry_point must be 'module:Class', got {env.entry_point!r}")
        if env.kind == "image" and not env.image:
            raise ApiError(400, "invalid_env_spec", "kind 'image' needs an image")
        if env.kind == "source":
            if not env.source or not _SOURCE_NAME_RE.match(env.source_name):
                raise ApiError(
                    400,
                    "invalid_env_spec",
                    "kind 'source' needs source (base64) and a source_name ending in .py (a module name) or .whl",
                )
            if env.source_name.endswith(".py") and env.entry_point.split(":")[0] != env.source_name[:-3]:
                raise ApiError(
                    400,
                    "invalid_env_spec",
                    f"entry_point module must be {env.source_name[:-3]!r}, the uploaded module's name",
                )

    def add(self, env: CustomEnv) -> dict[str, Any]:
        """Persist a validated custom env."""
        with self.db.session() as s:
            s.add(
                EnvRecord(
                    env_id=env.env_id,
                    name=envhub.parse_env_id(env.env_id)[0],
                    version=envhub.parse_env_id(env.env_id)[1] or 0,
                    owner=env.owner,
                    kind=env.kind,
                    entry_point=env.entry_point,
                    image=env.image,
                    source_name=env.source_name,
                    source=env.source,
                    kwargs=env.kwargs,
                    max_steps=env.max_steps,
                    description=env.description,
                    tags=env.tags,
                    created_at=env.created_at,
                )
            )
        with self._lock:
            self._custom[env.env_id] = env
        return env.public()

    def remove(self, env_id: str, who: Principal) -> None:
        """Delete a custom env (its owner or an admin only; built-ins cannot be deleted)."""
        env = self.custom(env_id)
        if env is None:
            self.get(env_id)  # raises UnknownEnvError for unknown ids
            raise ApiError(403, "forbidden", f"{env_id} is built in and cannot be deleted")
        if not who.can_see(env.owner):
            raise ApiError(403, "forbidden", f"{env.env_id} belongs to another owner")
        with self.db.session() as s:
            rec = s.get(EnvRecord, env.env_id)
            if rec is not None:
                s.delete(rec)
        with self._lock:
            self._custom.pop(env.env_id, None)


def _from_record(r: EnvRecord) -> CustomEnv:
    return CustomEnv(
        env_id=r.env_id,
        kind=r.kind,
        owner=r.owner,
        entry_point=r.entry_point,
        image=r.image,
        source_name=r.source_name,
        source=r.source,
        kwargs=dict(r.kwargs or {}),
        max_steps=r.max_steps,
        description=r.description,
        tags=list(r.tags or []),
        created_at=r.created_at,
    )
