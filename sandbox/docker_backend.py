"""The Docker backend: one locked-down container per sandbox, through the Docker SDK.

Each container runs the in-sandbox server as the container's root with every capability dropped
but the five it needs to run agent code as other uids (``SETUID``, ``SETGID``, ``SETPCAP``,
``KILL``, ``CHOWN``; no ``DAC_OVERRIDE``: it cannot read a file its mode denies), and the agent
code itself as unprivileged uids with no capabilities (:mod:`rockroll.sandbox.server.agents`):
the sandbox's ``exec`` calls as its agent uid ``B`` (:data:`SANDBOX_UID` plus a random multiple of
``max_sessions + 1``, the handle's ``extra["agent_uid"]``: see :func:`~rockroll.sandbox.confine.agent_uid_base`)
in ``/workspace`` (its 0700 tmpfs), env session ``n``'s commands as ``B + n`` in a 0700 folder of its own under
:data:`SERVER_DIR` (a root-owned 0711 tmpfs that also holds the server's plugins). The socket
directory is root's (0700), or, under a non-root manager, sticky and unlistable with the socket
0600 and owned by the manager: agent uids cannot connect to it or replace it. The handle's
``extra["agent_isolation"]`` is ``"uid"``. Agent commands hold at most the container's pids limit
less the server's share (:func:`~rockroll.sandbox.confine.agent_pids`) and are the OOM killer's first
choice, so a fork bomb or a memory hog fails its command and the server keeps answering. Also:

* ``network_mode="none"``: no interfaces but its own loopback, so no egress and no way to reach
  the host's loopback services or the Docker bridge. The manager still reaches the server because
  the server listens on a **unix socket in a bind-mounted host directory** (one per sandbox,
  ``<state_dir>/<manager>/<id>/`` -> ``/run/rockroll``). We chose this over a bridge network with a
  published port because (a) any network, even an ``internal`` one, lets the sandbox talk to
  other containers on it and (for published ports) to the host, (b) no port allocation or
  firewall rules are needed, (c) a unix socket is faster than TCP through docker-proxy, and (d)
  file permissions on the host directory decide who may talk to the sandbox. ``spec.network=True``
  opts into the default bridge for tasks that need the internet;
* ``cap_drop=["ALL"]``, ``security_opt=["no-new-privileges"]``, ``init=True`` (tini reaps
  zombies), CPU (``nano_cpus``), memory (swap off) and pids limits;
* a **read-only root filesystem** with writable tmpfs mounts for ``/workspace`` and ``/tmp`` only;
* labels ``rockroll.managed=1``, ``rockroll.manager``, ``rockroll.sandbox``,
  ``rockroll.generation`` and ``rockroll.pool``, which reconciliation uses to adopt or remove
  containers after a manager restart.

The Docker SDK is used from many threads at once (a burst of creates, the warm pool's refills, the
monitor): each thread gets a client of its own (:meth:`DockerBackend.client_for`). One shared
client is not safe there: the SDK keeps a connection pool per request URL, at most 25 of them,
and 64 threads starting 64 containers evict (close) a pool another thread is still using, which
fails that call with an ``AttributeError`` inside urllib3 (seen once in 8 bursts of 64,
bench/sandboxes/docker_burst.py). A thread's own client makes one call at a time, so its pools are never
closed under it.

Several daemons can be listed (``hosts``); a new sandbox goes to the one running the fewest
rockroll containers. Because the transport is a unix socket on the host's filesystem, every listed
daemon must run on the manager's machine (a local socket, rootless and rootful daemons, or
``tcp://127.0.0.1`` daemons); a remote daemon needs a manager (or socket relay) on that machine.

Threat model: code in the container is untrusted. The boundary is the kernel's namespaces,
cgroups, seccomp (Docker's default profile) and the dropped capabilities; the daemon and the host
directory with the socket are trusted.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from rockroll.sandbox.backends import BackendConfig
from rockroll.sandbox.base import DEFAULT_IMAGE, SandboxBackend, SandboxHandle, SandboxSpec
from rockroll.sandbox.confine import LINK_DIR, LINK_SUBDIR, agent_pids, agent_uid_base, private_dir
from rockroll.sandbox.errors import BackendUnavailable, ImageNotFound, SandboxStartError
from rockroll.sandbox.model_link import make_link_dir
from rockroll.sandbox.process import DEFAULT_STATE_DIR, ProcessBackend, ProcessConfig

__all__ = [
    "DockerBackend",
    "DockerConfig",
    "AutoConfig",
    "SANDBOX_UID",
    "CONTAINER_SOCKET_DIR",
    "SERVER_DIR",
    "SERVER_CAPS",
]

log = logging.getLogger(__name__)

#: the lowest agent uid of a container's ``exec`` calls (each sandbox draws its own base above it)
SANDBOX_UID = 10001
CONTAINER_SOCKET_DIR = "/run/rockroll"
#: the server's own folder in the container (a tmpfs): session workspaces, plugins
SERVER_DIR = "/srv/rockroll"
#: the only capabilities the server (container root) keeps
SERVER_CAPS = ("SETUID", "SETGID", "SETPCAP", "KILL", "CHOWN")
LOCAL = "local"
#: connections each thread's client keeps per daemon URL (a thread makes one call at a time)
CLIENT_POOL_SIZE = 2


def _connect(url: str, version: str | None = None) -> Any:
    """A Docker SDK client of daemon ``url`` (``local``: the environment's default)."""
    import docker

    opts: dict[str, Any] = {"timeout": 60, "max_pool_size": CLIENT_POOL_SIZE}
    if version:  # known already: the client skips asking the daemon for it
        opts["version"] = version
    return docker.from_env(**opts) if url == LOCAL else docker.DockerClient(base_url=url, **opts)


class DockerBackend(SandboxBackend):
    """Sandboxes as Docker containers (see the module docstring).

    Args:
        hosts: Docker daemon URLs; empty means the environment's default (``DOCKER_HOST`` or the
            local socket).
        state_dir: host directory holding each sandbox's socket directory.
        uid: the agent uid of the sandbox's ``exec`` calls (sessions get the uids above it).
    """

    name = "docker"
    level = "container"  # rockroll.sandbox.confinement: ranked with a confined process sandbox
    # an inspect per readiness poll cost 64 concurrent starts ~10 CPU-s of this process and dockerd
    # (bench/sandboxes/docker_burst.py); a container that dies while starting is seen within a second anyway
    alive_check_s = 1.0

    def __init__(
        self, hosts: tuple[str, ...] | list[str] = (), state_dir: str = DEFAULT_STATE_DIR, uid: int = SANDBOX_UID
    ):
        try:
            import docker  # noqa: F401 - only to say so now when it is missing
        except ImportError as e:  # pragma: no cover - docker is a dependency
            raise BackendUnavailable("the docker package is not installed") from e
        self.state_dir = Path(state_dir)
        self.uid = uid
        self._clients: dict[str, Any] = {}  # this constructing thread's clients; others get their own
        self._versions: dict[str, str] = {}
        self._local = threading.local()
        self._local.clients = self._clients
        self._known_images: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        for url in hosts or (LOCAL,):
            try:
                client = _connect(url)
                client.ping()
            except Exception as e:  # noqa: BLE001 - any failure means this daemon is unusable
                raise BackendUnavailable(f"Docker daemon {url} does not answer: {e}") from e
            self._clients[url] = client
            self._versions[url] = client.api.api_version
        self._load = {url: len(self._containers(url, {})) for url in self._clients}

    # ------------------------------------------------------------- helpers
    def client_for(self, url: str) -> Any:
        """The calling thread's Docker SDK client of daemon ``url`` (made on its first call; see the module docstring)."""
        clients = getattr(self._local, "clients", None)
        if clients is None:
            clients = self._local.clients = {}
        client = clients.get(url)
        if client is None:
            if url not in self._versions:
                raise KeyError(url)
            client = clients[url] = _connect(url, self._versions[url])
        return client

    def _containers(self, url: str, labels: dict[str, str]) -> list[Any]:
        filters = {"label": ["rockroll.managed=1"] + [f"{k}={v}" for k, v in labels.items()]}
        # ignore_removed: a container removed between listing and inspecting is not an error
        return self.client_for(url).containers.list(all=True, filters=filters, ignore_removed=True)

    def has_image(self, image: str, host: str | None = None) -> bool:
        import docker.errors

        url = host or next(iter(self._versions))
        if (url, image) in self._known_images:
            return True
        try:
            self.client_for(url).images.get(image)
        except docker.errors.ImageNotFound:
            return False
        except docker.errors.APIError:
            return False
        self._known_images.add((url, image))
        return True

    def _pick_host(self) -> str:
        with self._lock:
            url = min(self._load, key=lambda u: self._load[u])
            self._load[url] += 1
            return url

    def _socket_dir(self, manager: str, sandbox_id: str, generation: str) -> Path:
        private_dir(self.state_dir)  # 0700, ours, not a symlink: other local users reach no socket
        d = self.state_dir / manager / f"{sandbox_id}-g{generation}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        if os.geteuid() == 0:  # the container's root (the server) owns it alone
            os.chmod(d, 0o700)
        else:  # the server may create its socket, agents cannot list or replace it; state_dir keeps others out
            os.chmod(d, 0o1733)
        make_link_dir(d)
        return d

    # ----------------------------------------------------------- lifecycle
    def start(self, sandbox_id: str, spec: SandboxSpec, *, labels: dict[str, str]) -> SandboxHandle:
        """Create and start the container; on any failure remove what was made and raise.

        The container is created under a known name, so a start that fails after the daemon
        created it (a bad spec that only the runtime rejects, a daemon error, a timeout) leaves no
        container, no socket directory and no count in ``_load`` behind.
        """
        import docker.errors

        url = self._pick_host()
        if not self.has_image(spec.image, url):
            self._undo_start(url, None, None)
            raise ImageNotFound(spec.image, url)
        manager, generation = labels.get("rockroll.manager", "default"), labels.get("rockroll.generation", "0")
        name, d = f"rockroll-{manager}-{sandbox_id}-g{generation}", None  # d: the socket dir, once made
        env = {"ROCKROLL_SOCKET": f"{CONTAINER_SOCKET_DIR}/s.sock", "ROCKROLL_WORKSPACE": "/workspace"}
        env.update({"ROCKROLL_MAX_SESSIONS": str(spec.max_sessions), **dict(spec.env)})
        uid = agent_uid_base(self.uid, spec.max_sessions)  # this sandbox's own: RLIMIT_NPROC counts host-wide
        env.update(ROCKROLL_AGENT_UID=str(uid), ROCKROLL_SERVER_DIR=SERVER_DIR)
        env["ROCKROLL_AGENT_PIDS"] = str(agent_pids(spec.pids_limit))  # the rest is the server's
        if os.geteuid() != 0:
            env["ROCKROLL_SOCKET_UID"] = str(os.geteuid())  # the socket is 0600: the manager's
        tmpfs_opts = "exec,nosuid,nodev"
        try:
            d = self._socket_dir(manager, sandbox_id, generation)
            container = self.client_for(url).containers.create(
                spec.image,
                name=name,
                user="0:0",
                environment=env,
                labels=labels,
                network_mode="bridge" if spec.network else "none",
                cap_drop=["ALL"],
                cap_add=list(SERVER_CAPS),
                security_opt=["no-new-privileges"],
                init=True,
                nano_cpus=int(spec.cpus * 1e9),
                mem_limit=f"{spec.memory_mb}m",
                memswap_limit=f"{spec.memory_mb}m",
                pids_limit=spec.pids_limit,
                read_only=True,
                tmpfs={
                    "/workspace": f"size={spec.workspace_mb}m,mode=0700,uid={uid},gid={uid},{tmpfs_opts}",
                    SERVER_DIR: f"size={spec.workspace_mb}m,mode=0711,uid=0,gid=0,{tmpfs_opts}",
                    "/tmp": f"size=64m,mode=1777,uid=0,gid=0,{tmpfs_opts}",
                },
                volumes={
                    str(d): {"bind": CONTAINER_SOCKET_DIR, "mode": "rw"},
                    str(d / LINK_SUBDIR): {"bind": LINK_DIR, "mode": "ro"},  # the model link's socket only
                },
                working_dir="/workspace",
            )
            container.start()
        except BaseException as e:
            # no socket dir: nothing was created; 409: the name is another container's, leave it alone
            conflict = isinstance(e, docker.errors.APIError) and e.status_code == 409
            self._undo_start(url, None if d is None or conflict else name, d)
            if isinstance(e, docker.errors.ImageNotFound):
                self._known_images.discard((url, spec.image))
                raise ImageNotFound(spec.image, url) from e
            if isinstance(e, docker.errors.APIError):
                raise SandboxStartError(f"docker could not start {spec.image}: {e}", sandbox_id=sandbox_id) from e
            raise
        return SandboxHandle(
            sandbox_id=sandbox_id,
            backend=self.name,
            socket_path=str(d / "s.sock"),
            ref=container.id,
            host=url,
            generation=int(generation),
            extra={"dir": str(d), "level": self.level, "agent_isolation": "uid", "agent_uid": uid},
        )

    def _undo_start(self, url: str, name: str | None, d: Path | None) -> None:
        """Undo a failed :meth:`start`: remove container ``name`` (if any), socket dir ``d``, the load count."""
        import docker.errors

        with self._lock:
            self._load[url] = max(0, self._load[url] - 1)
        if name is not None:
            try:
                self.client_for(url).containers.get(name).remove(force=True)
            except docker.errors.NotFound:
                pass
            except Exception as e:  # noqa: BLE001 - keep the start's own error; reconciliation removes it later
                log.warning("could not remove container %s after a failed start: %s", name, e)
        if d is not None:
            shutil.rmtree(d, ignore_errors=True)

    def _container(self, handle: SandboxHandle) -> Any:
        import docker.errors

        url = handle.host if handle.host in self._versions else next(iter(self._versions))
        try:
            return self.client_for(url).containers.get(handle.ref)
        except docker.errors.NotFound:
            return None

    def stop(self, handle: SandboxHandle) -> None:
        import docker.errors

        c = self._container(handle)
        if c is not None:
            try:
                c.remove(force=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as e:
                if "already in progress" not in str(e):
                    raise
            with self._lock:
                if handle.host in self._load:
                    self._load[handle.host] = max(0, self._load[handle.host] - 1)
        d = handle.extra.get("dir") or os.path.dirname(handle.socket_path)
        if d and d.startswith(str(self.state_dir)):
            shutil.rmtree(d, ignore_errors=True)

    def is_alive(self, handle: SandboxHandle) -> bool:
        c = self._container(handle)
        return c is not None and c.status == "running"

    def exit_reason(self, handle: SandboxHandle) -> str:
        c = self._container(handle)
        if c is None:
            return "container removed"
        state = c.attrs.get("State", {})
        if state.get("OOMKilled"):
            return "oom-killed"
        return f"{state.get('Status', '?')}, exit {state.get('ExitCode', '?')}"

    def logs(self, handle: SandboxHandle, tail: int = 50) -> str:
        c = self._container(handle)
        return c.logs(tail=tail).decode(errors="replace") if c is not None else ""

    def list_managed(self, manager: str) -> list[SandboxHandle]:
        handles = []
        for url in self._versions:
            for c in self._containers(url, {"rockroll.manager": manager}):
                labels = c.labels
                d = (
                    self.state_dir
                    / manager
                    / f"{labels.get('rockroll.sandbox', '')}-g{labels.get('rockroll.generation', '0')}"
                )
                handles.append(
                    SandboxHandle(
                        sandbox_id=labels.get("rockroll.sandbox", ""),
                        backend=self.name,
                        socket_path=str(d / "s.sock"),
                        ref=c.id,
                        host=url,
                        generation=int(labels.get("rockroll.generation", "0")),
                        extra={"dir": str(d), "status": c.status},
                    )
                )
        return handles


class DockerConfig(BackendConfig):
    """Options of the ``docker`` backend (see :class:`DockerBackend`)."""

    type: ClassVar[str] = "docker"
    docker_hosts: tuple[str, ...] = Field(
        default=(), description="Docker daemon URLs (empty: the local default socket)"
    )
    state_dir: str = Field(default=DEFAULT_STATE_DIR, description="host directory of the sandboxes' sockets")
    uid: int = Field(default=SANDBOX_UID, description="user id the in-sandbox server runs as inside the container")

    def build(self) -> DockerBackend:
        return DockerBackend(hosts=self.docker_hosts, state_dir=self.state_dir, uid=self.uid)


class AutoConfig(BackendConfig):
    """The ``auto`` backend: Docker when a daemon answers and ``image`` exists, else processes."""

    type: ClassVar[str] = "auto"
    docker_hosts: tuple[str, ...] = Field(
        default=(), description="Docker daemon URLs (empty: the local default socket)"
    )
    state_dir: str = Field(
        default=DEFAULT_STATE_DIR, description="host directory of the sandboxes' sockets and workspaces"
    )
    image: str = Field(default=DEFAULT_IMAGE, description="Docker is used only when this image exists on the daemon")

    def build(self) -> DockerBackend | ProcessBackend:
        try:
            backend = DockerConfig(docker_hosts=self.docker_hosts, state_dir=self.state_dir).build()
            if not backend.has_image(self.image):
                raise BackendUnavailable(f"image {self.image} not built")
            return backend
        except BackendUnavailable:
            log.info("no usable Docker daemon; using the process backend")
            return ProcessConfig(state_dir=self.state_dir).build()
