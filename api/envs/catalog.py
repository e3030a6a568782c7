"""The env catalog the API serves: built-in envs from ``envhub`` plus custom envs from the database.

Custom envs are registered through ``POST /v1/envs`` in one of three kinds:

* ``entry_point``: a ``module:Class`` already installed in the sandbox image;
* ``image``: a Docker image that runs the in-sandbox server and knows the entry point;
* ``source``: an uploaded single module (``.py``) or pure-Python wheel (``.whl``), stored in the
  database and put on ``sys.path`` only inside sandboxes.

Names and visibility (several owners share one server): a custom env lives in its owner's namespace,
``alice/Maze-v0`` (``Maze-v0`` registered by alice is stored so; another owner's namespace and
``rockroll``, the built-in envs' own, are refused, as is a built-in env's id). Lookups take exact ids:
a bare id (``FrozenLake``, ``FrozenLake-v1``) only ever reaches the built-in envs, a custom env needs its
full ``owner/Name-vN``, and a near miss is answered 404 with suggestions, never substituted. A custom env
is ``private`` (only its owner, and admins, see and use it) unless registered ``public`` (everyone sees
and uses it; only its owner or an admin deletes it). Another owner's private env answers exactly as an
unknown id does (404, suggestions drawn from what the caller may see). Sessions and jobs resolve ids
with their owner's name, so an admin lists, shows and deletes every env but plays only built-in, public
and its own ones.

The control plane never imports custom env code itself: :meth:`CustomEnv.files` is what the
placement writes into each sandbox of the env's own pool (a manifest plus the upload), and
:mod:`rockroll.sandbox.server.plugins` registers it there.
"""

from __future__ import annotations

import builtins
import copy
import difflib
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

import rockroll.envhub as envhub
from rockroll.api.db import Database, EnvRecord
from rockroll.api.server.auth import Principal
from rockroll.api.server.errors import ApiError

__all__ = ["CustomEnv", "Catalog", "KINDS", "VISIBILITIES", "RESERVED_NAMESPACE", "Viewer"]

KINDS = ("entry_point", "image", "source")
VISIBILITIES = ("private", "public")
#: the built-in envs' namespace (gymnasium's ``rockroll/``): no owner registers in it
RESERVED_NAMESPACE = envhub.GYM_NAMESPACE
#: who looks: a principal, or an owner's name (an ordinary caller)
Viewer = Principal | str
_MAX_ID = 128  # api_envs.env_id and api_sessions.env_id are String(128)
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
    visibility: str = "private"

    def public(self) -> dict[str, Any]:
        """The JSON view of this env (without the source bytes), keys in the order of :func:`builtin_view`."""
        _namespace, name, version = envhub.split_env_id(self.env_id)
        return {
            "id": self.env_id,
            "name": name,
            "version": version or 0,
            "kind": self.kind,
            "builtin": False,
            "owner": self.owner,
            "visibility": self.visibility,
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
        digest = hashlib.sha256(self.env_id.encode()).hexdigest()[:8]  # 'a_b/c' and 'a/b_c' stay apart
        folder = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', self.env_id)}-{digest}"
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
        "owner": RESERVED_NAMESPACE,
        "visibility": "public",
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

    def list(self, who: Viewer, tag: str | None = None) -> list[dict[str, Any]]:
        """Every env ``who`` may see (built-in, public, its own; all for admins), sorted by id."""
        out = {s.id: builtin_view(s) for s in envhub.list_envs()}
        out.update({e.env_id: e.public() for e in self._custom.values() if _visible(e, who)})
        return [v for _, v in sorted(out.items()) if tag is None or tag in v["tags"]]

    def custom(self, env_id: str, who: Viewer) -> CustomEnv | None:
        """The custom env registered under exactly ``env_id`` that ``who`` may see, or None."""
        found = self._custom.get(env_id)
        return found if found is not None and _visible(found, who) else None

    def get(self, env_id: str, who: Viewer) -> dict[str, Any]:
        """The JSON view of one env ``who`` may see; raises ``UnknownEnvError`` with suggestions.

        A bare id resolves among the built-in envs first (``FrozenLake``: its newest version); a custom
        env only by its exact id. Another owner's private env is answered as an unknown one.
        """
        try:
            namespace = envhub.split_env_id(env_id)[0]
        except envhub.RegistrationError:
            namespace = ""  # malformed: nothing has this id; answer with suggestions like any unknown id
        if namespace is None:
            try:
                return builtin_view(envhub.spec(env_id))
            except envhub.UnknownEnvError:
                pass
        found = self.custom(env_id, who)
        if found is not None:
            return found.public()
        raise envhub.UnknownEnvError(env_id, self.suggest(env_id, who))

    def suggest(self, env_id: str, who: Viewer) -> builtins.list[str]:
        """Up to three ids ``who`` may see that look like ``env_id`` (for "did you mean")."""
        ids = [v["id"] for v in self.list(who)]
        return difflib.get_close_matches(env_id, ids, n=3, cutoff=0.5)

    def resolve(self, env_id: str, who: Viewer) -> str:
        """The full versioned id ``env_id`` refers to for ``who``."""
        return self.get(env_id, who)["id"]

    # ------------------------------------------------------------ writing
    def namespaced(self, env_id: str, owner: str) -> str:
        """``env_id`` in ``owner``'s namespace (``Maze-v0`` -> ``owner/Maze-v0``); raises ``ApiError``.

        403 for another owner's namespace or the reserved ``rockroll`` one (any case), 409 for a built-in
        env's id, 422 for an id the namespace makes too long.
        """
        namespace, name, version = envhub.split_env_id(env_id)
        if version is None:
            raise ApiError(400, "invalid_env_spec", f"env id {env_id!r} needs a version suffix, e.g. '{name}-v0'")
        bare = f"{name}-v{version}"
        asked = env_id.split("/")[0] if "/" in env_id else owner
        if RESERVED_NAMESPACE in (owner.lower(), asked.lower()):
            raise ApiError(403, "forbidden", f"the namespace {RESERVED_NAMESPACE!r} is reserved for the built-in envs")
        if namespace is not None and namespace != owner:
            raise ApiError(
                403,
                "forbidden",
                f"you may register envs in your own namespace only: '{owner}/{bare}' (or just '{bare}')",
            )
        if any(s.id == bare for s in envhub.list_envs()):
            raise ApiError(
                409, "env_exists", f"{bare} is a built-in env; its id cannot be reused (pick another name or version)"
            )
        full = f"{owner}/{bare}"
        if len(full) > _MAX_ID:
            raise ApiError(
                422, "invalid_env_spec", f"{full!r} is longer than {_MAX_ID} characters; pick a shorter name"
            )
        envhub.split_env_id(full)  # the owner's name must make a valid namespace (token names do)
        return full

    def check_new(self, env: CustomEnv) -> None:
        """Raise ``ApiError`` when ``env`` (its id already namespaced) cannot be registered as given."""
        _namespace, _name, version = envhub.split_env_id(env.env_id)
        if env.env_id in self._custom:
            raise ApiError(
                409, "env_exists", f"{env.env_id} is already registered; bump the version (-v{(version or 0) + 1})"
            )
        if env.visibility not in VISIBILITIES:
            raise ApiError(400, "invalid_env_spec", f"visibility must be one of {', '.join(VISIBILITIES)}")
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
                    visibility=env.visibility,
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

    def remove(self, env_id: str, who: Principal) -> CustomEnv:
        """Delete a custom env (its owner or an admin only; built-ins cannot be deleted); returns it.

        Another owner's private env is answered as an unknown one (404), a public one with 403.
        """
        env = self.custom(env_id, who)
        if env is None:
            self.get(env_id, who)  # raises UnknownEnvError for ids ``who`` cannot see
            raise ApiError(403, "forbidden", f"{env_id} is built in and cannot be deleted")
        if not who.can_see(env.owner):
            raise ApiError(403, "forbidden", f"{env.env_id} is {env.owner}'s; only its owner or an admin deletes it")
        with self.db.session() as s:
            rec = s.get(EnvRecord, env.env_id)
            if rec is not None:
                s.delete(rec)
        with self._lock:
            self._custom.pop(env.env_id, None)
        return env


def _visible(env: CustomEnv, who: Viewer) -> bool:
    """Whether ``who`` may see and use ``env``: public, its own, or an admin."""
    if env.visibility == "public":
        return True
    return who.can_see(env.owner) if isinstance(who, Principal) else bool(who) and who == env.owner


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
        visibility=r.visibility or "private",
    )
