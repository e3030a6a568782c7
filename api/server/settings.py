"""The control plane's one ``Settings`` object (pydantic-settings, env prefix ``ROCKROLL_``).

Every field can be set from the environment (``ROCKROLL_PORT=9000``) or from ``rockroll serve-api``
options. Paths starting with ``~`` are expanded against the home directory of the server user.
A bad setting, from either source, raises the config dialect's
:class:`~rockroll.envs.config.ConfigError` naming the key and what it allows.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError
from pydantic_settings import SettingsConfigDict

from rockroll.api.server.settings_alerts import AlertSettings
from rockroll.envs.config import ConfigError, OneOf
from rockroll.sandbox.backends import backend_names
from rockroll.sandbox.confinement import MINIMUMS

__all__ = ["Settings", "is_loopback", "REPLICA_SEP"]

#: between the deployment's name and a replica's id in the replica's manager (lease) name
REPLICA_SEP = "-r-"


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Settings(AlertSettings):
    """Configuration of ``rockroll serve-api``."""

    model_config = SettingsConfigDict(env_prefix="ROCKROLL_", extra="forbid")

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as e:  # one error style for every config: the key and what it allows
            raise ConfigError.from_validation(e, type(self)) from e

    host: str = Field(default="127.0.0.1", description="Address to bind.")
    port: int = Field(default=8080, ge=0, le=65535, description="TCP port to bind (0: any free port).")
    backend: Annotated[str, OneOf(backend_names)] = Field(
        default="auto",
        description="Sandbox backend type (rockroll.sandbox.backends): auto uses Docker when a daemon answers, "
        "else processes; docker; process; or any registered one.",
    )
    database_url: str = Field(
        default="sqlite:///~/.rockroll/rockroll.db", description="Any SQLAlchemy URL (sqlite, postgresql+psycopg...)."
    )
    dev_mode: bool = Field(default=False, description="Accept requests without a token (loopback binds only).")
    pool_size: int = Field(default=1, ge=0, le=64, description="Warm sandboxes kept for sessions.")
    max_sandboxes: int = Field(default=8, ge=1, le=1024, description="Most sandboxes at once.")
    warm_pool_size: int = Field(
        default=0,
        ge=0,
        le=64,
        description="Started sandboxes kept idle (per spec) that new user sandboxes are drawn from; 0: none. "
        "They count against no owner until handed out (rockroll.sandbox.pool.WarmPoolConfig).",
    )
    max_sessions_per_sandbox: int = Field(default=64, ge=1, le=4096, description="Most env sessions per sandbox.")
    max_sandboxes_per_owner: int = Field(
        default=4, ge=1, le=1024, description="Most user sandboxes one token owner holds."
    )
    session_idle_ttl_s: float = Field(
        default=3600.0, gt=0, description="Close a session nobody used for this long (its sandbox slot is freed)."
    )
    session_reap_interval_s: float = Field(
        default=30.0,
        ge=0.1,
        le=3600.0,
        description="How often idle sessions are reaped and the node agents' "
        "sessions reconciled with their rows (a session no open row stands for is closed at its agent).",
    )
    max_upload_bytes: int = Field(default=5_000_000, ge=1024, description="Largest uploaded env source or wheel.")
    train_jobs: bool = Field(default=True, description="Accept train jobs (they run the trainer inside this server).")
    job_workers: int = Field(default=2, ge=1, le=64, description="Jobs that run at the same time.")
    log_level: str = Field(default="info", description="uvicorn log level.")
    sandbox_state_dir: str = Field(
        default="", description="Sockets and process workspaces (default /tmp/rockroll-sb-UID)."
    )
    instance: str = Field(
        default="",
        max_length=40,
        description="Name labelling this server's sandboxes (default: derived from the database URL).",
    )
    replica: str = Field(
        default="",
        max_length=24,
        pattern=r"^[A-Za-z0-9_-]*$",
        description="This server's id as one of several control-plane replicas on one database (PostgreSQL): "
        "they share node agents, sessions and jobs; sessions run on node agents only (no embedded node), so "
        "losing a replica loses none. Empty: the only server on its database.",
    )
    sandbox_adopt_timeout_s: float = Field(
        default=600.0,
        ge=0,
        le=7 * 86_400,
        description="A process sandbox this server hands over at shutdown stops by itself when no server adopts it "
        "within this many seconds (0: it waits forever); rockroll sandbox prune --state-dir stops leftovers.",
    )
    # the confinement rule (issue 48 item 1, rockroll.sandbox.confinement)
    min_isolation: Annotated[str, OneOf(MINIMUMS)] = Field(
        default="strongest",
        description="Weakest isolation the code of owners and models may run with (sandboxes, code rewards, job "
        "workers): strongest (what this machine offers: confined when root with bubblewrap and rockroll-sandbox), "
        "confined, bwrap, unshare or none. The server refuses to start below it; naming a weaker level than the "
        "machine offers is the operator's opt-in, logged at start and shown on /ui.",
    )
    stop_sandboxes_on_exit: bool = Field(
        default=False,
        description="On shutdown (SIGTERM, Ctrl-C), stop every sandbox this server runs. Off: they stay up and "
        "the next server on this database adopts them (their sessions answer 410); the server's state "
        "directory is private, so nobody else reaches them meanwhile.",
    )
    # per-owner sandboxes (issue 13 items 2, 7)
    sandbox_idle_ttl_s: float = Field(
        default=600.0,
        gt=0,
        description="Stop a session sandbox (an owner's, or a custom env's) that hosted no session for this long; "
        "the warm pool keeps pool_size unassigned ones. Every sandbox, user or session, counts against its "
        "owner's max_sandboxes_per_owner, and an owner who holds one cannot take the last free one of max_sandboxes.",
    )
    # jobs (issue 13 items 4, 10)
    job_dir: str = Field(
        default="",
        description="Owners' job directories, one folder each: every path a job config names resolves inside its "
        "owner's (default: jobs/ beside a SQLite database, else ~/.rockroll/jobs).",
    )
    job_model_dirs: list[str] = Field(
        default_factory=list,
        max_length=32,
        description="Folders of models that jobs may read (model.path, engine model_path and tokenizer may name an "
        "existing path inside one, absolute); nothing is ever built or written there. Their files must be readable "
        "by job_user (chmod -R a+rX): confined workers read them as that user.",
    )
    job_engine_urls: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="URLs (http://host:port[/path]) or hosts (host[:port]) a job's worker may reach: engines "
        "(engine.args.base_url, rollout.engine.base_url), judge rewards, W&B, their defaults included when a config "
        "leaves them unset; empty: none, every URL a job would reach is refused.",
    )
    # outbound secrets and scraping (issue 48 items 7a, 7d)
    job_api_key_envs: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Environment variables of the server a job may name as an API key (a judge reward's "
        "api_key_env); their values are passed to the workers of jobs that name them. Empty: none (a judge "
        "sends no key).",
    )
    metrics_token: str = Field(
        default="",
        max_length=512,
        description="Bearer token GET /metrics requires (Prometheus: authorization.credentials_file); it then "
        "shows every label. Empty: /metrics is open, with owner names and server paths replaced by keyed hashes.",
    )
    job_user: str = Field(
        default="rockroll-sandbox",
        max_length=64,
        description="When the server runs as root and this user exists, job workers run as it, confined by bubblewrap "
        "to their owner's job folder (the interpreter and sources mounted back read-only, even under a 0700 /root); "
        "without bubblewrap as that user directly; otherwise as the server's own user ('': always), which every "
        "job's log then says.",
    )
    job_log_max_bytes: int = Field(
        default=1_000_000,
        ge=10_000,
        le=1_000_000_000,
        description="A job's log file is rotated at this size (one older file kept); the database keeps its tail.",
    )
    # job caps per owner (issue 48 items 3, 4; rockroll.api.jobs.caps, rockroll.api.jobs.fair); they bind admins
    # too, and job_owner_caps gives an owner values of its own
    max_job_config_bytes: int = Field(
        default=1 << 20,
        ge=1024,
        le=16 << 20,
        description="Largest job config (its JSON, as sent) a job may be submitted with; over it answers 413 "
        "too_large. Big data belongs in files of the owner's job directory (config_path, paths in env kwargs).",
    )
    max_active_jobs_per_owner: int = Field(
        default=8, ge=1, le=100_000, description="Most jobs one owner has queued or running; one more answers 429."
    )
    max_kept_jobs_per_owner: int = Field(
        default=1000,
        ge=1,
        le=10_000_000,
        description="Most jobs of one owner the server keeps: a new job deletes that owner's oldest finished ones "
        "(record, metric history, logs); only other owners' jobs are never touched.",
    )
    max_job_list_bytes: int = Field(
        default=4 << 20,
        ge=16_384,
        le=256 << 20,
        description="Largest GET /v1/jobs answer: a page is cut at this size (at least one job), and its Link and "
        "X-Next-Offset headers name the rest.",
    )
    max_job_total_steps: int = Field(
        default=100_000, ge=1, description="Most total_steps a train job may ask for (422 over_cap beyond)."
    )
    max_job_episodes: int = Field(
        default=1_000_000, ge=1, description="Most episodes an eval job may ask for, over all its envs (422 over_cap)."
    )
    max_job_wall_s: float = Field(
        default=86_400.0,
        gt=0,
        le=365 * 86_400,
        description="A job running longer than this (from its start) is cancelled, its error saying why.",
    )
    job_workers_per_owner: int = Field(
        default=0,
        ge=0,
        le=1024,
        description="Most of the job_workers one owner's jobs hold at once (0: all of them). A freed worker goes "
        "to the waiting owner with the fewest running jobs (round robin among equals).",
    )
    job_reserve_workers: int = Field(
        default=1,
        ge=0,
        le=64,
        description="Workers beyond job_workers that only an owner running no job may take: however long one "
        "owner's jobs run, another owner's job starts at once (0: none; the server then runs at most job_workers).",
    )
    job_owner_caps: dict[
        str,
        dict[
            Annotated[
                str,
                OneOf(
                    ("max_job_config_bytes", "max_active_jobs_per_owner", "max_kept_jobs_per_owner",
                     "max_job_total_steps", "max_job_episodes", "max_job_wall_s", "job_workers_per_owner")
                ),
            ],
            Annotated[float, Field(gt=0)],
        ],
    ] = Field(
        default_factory=dict,
        max_length=10_000,
        description="Job caps of single owners, raised or lowered (JSON in the environment), e.g. "
        '{"alice": {"max_active_jobs_per_owner": 32, "max_job_wall_s": 604800}}.',
    )  # fmt: skip
    # exec and file quotas (issue 13 item 3)
    max_sandbox_calls_per_owner: int = Field(
        default=8,
        ge=1,
        le=1024,
        description="Most exec and file calls one token owner has running at once; one more answers 429 "
        "(code capacity) at once, nothing queues.",
    )
    max_sandbox_calls: int = Field(
        default=64,
        ge=1,
        le=4096,
        description="Most exec and file calls running at once over all owners, each on its own thread (never the "
        "request loop nor the pool other routes share); one more answers 429.",
    )
    max_file_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1,
        le=16 * 1024 * 1024,
        description="Largest file read or written through the files API (413 beyond it; 16 MiB at most, the "
        "sandbox protocol's limit).",
    )
    file_call_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="A file read or write the sandbox does not answer within this many seconds fails with 504.",
    )
    # caps a caller may ask for (issue 13 item 5): over one answers 422 over_cap (rockroll.api.server.caps)
    max_cpus: float = Field(default=2.0, gt=0, le=64, description="Most CPU cores a caller may give a sandbox.")
    max_memory_mb: int = Field(
        default=2048, ge=32, le=262_144, description="Most memory (MiB) a caller may give a sandbox."
    )
    max_pids: int = Field(default=512, ge=16, le=65_536, description="Most processes a caller may give a sandbox.")
    max_workspace_mb: int = Field(
        default=1024, ge=1, le=65_536, description="Most workspace disk (MiB) a caller may give a sandbox."
    )
    max_exec_timeout_s: float = Field(
        default=300.0, gt=0, le=600, description="Longest timeout a caller may give a command."
    )
    max_sandbox_ttl_s: float = Field(
        default=86_400.0,
        gt=0,
        le=30 * 86_400,
        description="Longest lifetime (ttl_s) a caller may give a sandbox of POST /v1/sandboxes; the server stops it "
        "then, and its answers say it expired.",
    )
    sandbox_ttl_s: float = Field(
        default=3_600.0,
        gt=0,
        le=30 * 86_400,
        description="Lifetime of a sandbox whose caller gives no ttl_s (at most max_sandbox_ttl_s).",
    )
    network_owners: list[str] = Field(
        default_factory=list,
        max_length=1024,
        description="Token owners who may ask for a sandbox with a network (JSON list in the environment); "
        "empty: nobody.",
    )
    # the data plane (issue 14): node agents step sessions; the control plane signs their session tokens
    cluster_secret: str = Field(
        default="",
        description="Shared secret (at least 32 characters) that signs session tokens and that node agents present "
        "to register; empty: a random one per start, so only the embedded node agent serves the data plane.",
    )
    session_token_ttl_s: float = Field(
        default=900.0,
        gt=0,
        le=86_400,
        description="Lifetime of a session token for the data plane (refresh it by POST /v1/sessions/{id}/token).",
    )
    embedded_node: bool = Field(
        default=True,
        description="Run a node agent inside this server (one machine); off: sessions go to registered nodes.",
    )
    public_url: str = Field(
        default="",
        description="Base URL clients reach this server at, advertised as the embedded node's data-plane "
        "endpoint (default: the URL each request came to).",
    )
    # DNS rebinding (issue 13): in dev mode, only requests naming one of these hosts are served
    dev_hosts: list[str] = Field(
        default_factory=lambda: ["localhost", "127.0.0.1", "::1"],
        max_length=64,
        description="Host header names (any port) a dev-mode server answers; others get 400, so that a web page "
        "whose name is rebound to 127.0.0.1 cannot use the token-less API.",
    )

    def job_root(self) -> Path:
        """Where owners' job directories live (``job_dir``, else beside the SQLite database, else ~/.rockroll)."""
        if self.job_dir:
            return Path(os.path.expanduser(self.job_dir)).resolve()
        url = self.resolved_database_url()
        prefix = "sqlite:///"
        if url.startswith(prefix) and url[len(prefix) :] not in ("", ":memory:"):
            return Path(url[len(prefix) :]).resolve().parent / "jobs"
        return Path(os.path.expanduser("~/.rockroll/jobs")).resolve()

    def resolved_database_url(self) -> str:
        """The database URL with ``~`` expanded in a SQLite path (its folder is created)."""
        url = self.database_url
        prefix = "sqlite:///"
        if url.startswith(prefix) and url[len(prefix) :] not in ("", ":memory:"):
            path = Path(os.path.expanduser(url[len(prefix) :]))
            path.parent.mkdir(parents=True, exist_ok=True)
            return prefix + str(path)
        return url

    def manager_name(self) -> str:
        """The sandbox manager's name: stable for one database, distinct between databases.

        A restarted server adopts the sandboxes labelled with it; servers on other databases
        never touch them.
        """
        base = self.deployment_name()
        return f"{base}{REPLICA_SEP}{self.replica}" if self.replica else base

    def deployment_name(self) -> str:
        """The name shared by every server of this database (a replica's manager name adds its id)."""
        if self.instance:
            return self.instance
        digest = hashlib.sha256(self.resolved_database_url().encode()).hexdigest()[:10]
        return f"api-{digest}"

    def check(self) -> None:
        """Raise ``ValueError`` for combinations that must not run."""
        if self.cluster_secret and len(self.cluster_secret.encode()) < 32:
            raise ValueError(
                "cluster_secret (ROCKROLL_CLUSTER_SECRET) must be at least 32 characters; "
                "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
        if self.replica and not self.cluster_secret:
            raise ValueError(
                "a replica (--replica) needs the deployment's cluster secret (--cluster-secret-file or "
                "ROCKROLL_CLUSTER_SECRET): every replica signs session tokens and admits node agents with it"
            )
        if self.replica and self.embedded_node:
            raise ValueError(
                "a replica serves sessions on node agents only: run it with --no-embedded-node (sessions on an "
                "embedded node would die with the replica)"
            )
        if self.dev_mode and not is_loopback(self.host):
            raise ValueError(
                f"dev mode (no tokens) is only allowed on a loopback address, not {self.host!r}; "
                "bind 127.0.0.1 or create a token with `rockroll token create`"
            )
