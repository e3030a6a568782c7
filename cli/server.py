"""``rockroll serve-api`` and ``rockroll serve-node``: run the control plane and a node agent."""

from __future__ import annotations

import logging
import os
import secrets
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from rockroll.api.nodes.ray import RayNodes, ray_init_args
from rockroll.cli.envs import fail
from rockroll.sandbox.backends import backend_names
from rockroll.sandbox.node.serve import NodeOptions, run_node

if TYPE_CHECKING:
    import uvicorn

    from rockroll.api.server.settings import Settings


__all__ = ["node", "serve"]

console = Console(stderr=True)


def _settings(**overrides: object) -> Settings:
    from rockroll.api.server.settings import Settings

    return Settings(**{k: v for k, v in overrides.items() if v is not None})


def serve(
    host: str = typer.Option(None, help="Address to bind (default 127.0.0.1)."),
    port: int = typer.Option(None, help="Port (default 8080; 0 picks a free one)."),
    backend: str = typer.Option(None, help=f"Sandbox backend: {' | '.join(backend_names())}."),
    database_url: str = typer.Option(None, "--db", help="SQLAlchemy URL (default sqlite:///~/.rockroll/rockroll.db)."),
    dev: bool = typer.Option(None, "--dev/--no-dev", help="No tokens needed (loopback binds only)."),
    pool_size: int = typer.Option(None, help="Warm sandboxes kept for sessions."),
    max_sandboxes: int = typer.Option(None, help="Most sandboxes at once."),
    sandbox_state_dir: str = typer.Option(None, help="Sockets and process workspaces of sandboxes."),
    max_sessions_per_sandbox: int = typer.Option(None, help="Most env sessions placed on one sandbox."),
    train_jobs: bool = typer.Option(None, "--train-jobs/--no-train-jobs", help="Accept train jobs."),
    max_cpus: float = typer.Option(None, help="Most CPU cores a caller may give a sandbox (default 2)."),
    max_memory_mb: int = typer.Option(None, help="Most memory (MiB) a caller may give a sandbox (default 2048)."),
    max_pids: int = typer.Option(None, help="Most processes a caller may give a sandbox (default 512)."),
    max_workspace_mb: int = typer.Option(None, help="Most workspace disk (MiB) a caller may give a sandbox."),
    max_exec_timeout_s: float = typer.Option(None, help="Longest timeout a caller may give a command (default 300)."),
    max_sandbox_ttl_s: float = typer.Option(
        None, help="Longest lifetime (ttl_s) a caller may give a sandbox (default 86400; unasked: 3600)."
    ),
    network_owner: list[str] = typer.Option(None, help="A token owner who may ask for a networked sandbox (repeat)."),
    cluster_secret_file: str = typer.Option(
        None,
        help="File holding the cluster secret (signs session tokens; node agents register with it). "
        "Default: ROCKROLL_CLUSTER_SECRET, else a random one per start (embedded node only).",
    ),
    embedded_node: bool = typer.Option(
        None, "--embedded-node/--no-embedded-node", help="Run a node agent inside this server (default: on)."
    ),
    public_url: str = typer.Option(None, help="Base URL clients reach this server at (the embedded node's endpoint)."),
    session_token_ttl_s: float = typer.Option(None, help="Lifetime of a data-plane session token (default 900 s)."),
    replica: str = typer.Option(
        None,
        help="This server's id as one of several control-plane replicas on one PostgreSQL database (they "
        "share node agents, sessions and jobs). Needs the cluster secret; implies --no-embedded-node.",
    ),
    ray: str = typer.Option(
        None,
        "--ray",
        help="Run one node agent per node of this Ray cluster: HOST:PORT of its head (GCS), auto, or local "
        "(a one-machine Ray cluster on 127.0.0.1). Implies --no-embedded-node unless given.",
    ),
) -> None:
    """Run the control plane (FastAPI + uvicorn); OpenAPI docs at /docs, health page at /ui.

    Example: rockroll serve-api --port 8080 --backend process --dev
    Example: rockroll serve-api --ray 10.0.0.1:6379 --cluster-secret-file secret.txt
    Example: rockroll serve-api --db postgresql+psycopg://... --replica a --cluster-secret-file secret.txt
    """
    settings = _checked_settings(
        ray, cluster_secret_file,
        host=host, port=port, backend=backend, database_url=database_url, dev_mode=dev, pool_size=pool_size,
        max_sandboxes=max_sandboxes, sandbox_state_dir=sandbox_state_dir,
        max_sessions_per_sandbox=max_sessions_per_sandbox, train_jobs=train_jobs, max_cpus=max_cpus,
        max_memory_mb=max_memory_mb, max_pids=max_pids, max_workspace_mb=max_workspace_mb,
        max_exec_timeout_s=max_exec_timeout_s, max_sandbox_ttl_s=max_sandbox_ttl_s,
        network_owners=network_owner or None,
        embedded_node=embedded_node if embedded_node is not None or (ray is None and not replica) else False,
        replica=replica, public_url=public_url, session_token_ttl_s=session_token_ttl_s,
    )  # fmt: skip
    _run_api(settings, ray)


def _checked_settings(ray: str | None, cluster_secret_file: str | None, **fields: object) -> Settings:
    """The server's settings from the command's options (``fields``) and the secret file, checked; bad
    ones exit 2 with one line. With ``--ray`` and no cluster secret, a random one."""
    try:
        settings = _settings(**fields, cluster_secret=_read_secret(cluster_secret_file))
        if ray is not None and not settings.cluster_secret:  # the agents on Ray nodes register with it
            settings = settings.model_copy(update={"cluster_secret": secrets.token_urlsafe(32)})
        settings.check()
        if ray is not None:
            ray_init_args(ray)  # a malformed address fails here
    except ValueError as e:
        fail(str(e), 2, e)
    return settings


def _run_api(settings: Settings, ray: str | None) -> None:
    """Bind, then serve the app with uvicorn until stopped (with ``ray``: and the agents on the Ray nodes)."""
    import uvicorn

    sock = _bind(settings.host, settings.port)  # a port in use fails here, before the app starts anything
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if settings.dev_mode:
        console.print(f"[yellow]DEVELOPMENT MODE[/yellow]: requests need no token (bound to {settings.host} only)")
    from rockroll.api.server.app import create_app

    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    _announce_port(server)
    cluster = _ray_nodes(ray, settings, sock) if ray is not None else None
    try:
        if cluster is not None:
            cluster.start()
        server.run(sockets=[sock])
    finally:
        if cluster is not None:
            cluster.close()
        sock.close()


def _ray_nodes(address: str, settings: Settings, sock: socket.socket) -> RayNodes:
    """The agents-per-Ray-node supervisor; its agents reach this server at ``--public-url`` or the bound address."""
    host, port = sock.getsockname()[:2]
    if not settings.public_url and host in ("0.0.0.0", "::"):
        fail("with --ray and a wildcard --host, give --public-url: the URL node agents reach this server at", 2)
    control_url = settings.public_url or f"http://{host}:{port}"
    return RayNodes(
        address, control_url=control_url, secret=settings.cluster_secret, backend=settings.backend,
        state_root=settings.sandbox_state_dir, max_sandboxes=settings.max_sandboxes,
        max_sessions_per_sandbox=settings.max_sessions_per_sandbox,
    )  # fmt: skip


def _read_secret(path: str | None) -> str | None:
    """The cluster secret in ``path`` (stripped), None when no file is named; ValueError when unreadable."""
    if path is None:
        return None
    try:
        return Path(path).read_text().strip()
    except OSError as e:
        raise ValueError(f"cannot read the cluster secret file {path!r}: {e.strerror}") from e


def node(
    control_plane: str = typer.Option(
        "", help="Control plane URL to register with (e.g. http://127.0.0.1:8080); replicas: URLs joined by commas."
    ),
    node_id: str = typer.Option(socket.gethostname().split(".")[0] or "node", "--id", help="This agent's id."),
    host: str = typer.Option("127.0.0.1", help="Address the data plane binds."),
    port: int = typer.Option(0, help="Port of the data plane (0: a free one, printed)."),
    backend: str = typer.Option("process", help="Sandbox backend: process (tied to the agent's life) | docker."),
    state_dir: str = typer.Option("", help="Sockets, workspaces and records (default /tmp/rockroll-node-UID-ID)."),
    max_sandboxes: int = typer.Option(8, min=1, max=1024, help="Most sandboxes on this machine."),
    max_sessions_per_sandbox: int = typer.Option(64, min=1, max=4096, help="Most env sessions on one sandbox."),
    cluster_secret_file: str = typer.Option(None, help="File holding the cluster secret (or ROCKROLL_CLUSTER_SECRET)."),
) -> None:
    """Run a node agent: this machine's sandboxes and the data plane where clients step sessions directly.

    Example: rockroll serve-node --control-plane http://127.0.0.1:8080 --cluster-secret-file secret.txt
    """
    try:
        secret = _read_secret(cluster_secret_file) or os.environ.get("ROCKROLL_CLUSTER_SECRET", "")
        if len(secret.encode()) < 32:
            raise ValueError(
                "a node agent needs the cluster secret (at least 32 characters): --cluster-secret-file "
                "or ROCKROLL_CLUSTER_SECRET, the same as the control plane's"
            )
        options = NodeOptions(
            node_id=node_id, secret=secret, control_plane=control_plane, host=host, port=port, backend=backend,
            state_dir=state_dir, max_sandboxes=max_sandboxes, max_sessions_per_sandbox=max_sessions_per_sandbox,
        )  # fmt: skip
    except ValueError as e:
        fail(str(e), 2, e)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run_node(options)


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (as uvicorn binds); OSError naming the address when it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(e.errno, f"cannot listen on {host}:{port}: {e.strerror}") from e
    sock.set_inheritable(True)
    return sock


def _announce_port(server: uvicorn.Server) -> None:
    """Print ``rockroll listening on http://HOST:PORT`` once bound (port 0 reveals the real port)."""
    original = server.startup

    async def startup(sockets: list[socket.socket] | None = None) -> None:
        await original(sockets=sockets)
        for s in server.servers:
            for sock in s.sockets:
                host, port = sock.getsockname()[:2]
                print(f"rockroll listening on http://{host}:{port}", flush=True)
                return

    server.startup = startup
