"""Sandbox routes: create, list, show, delete, restart, exec and files, per owner."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy import select

from rockroll.api.db import SandboxOwner
from rockroll.api.sandboxes.owner_limits import CallsDep
from rockroll.api.sandboxes.ttl import check_not_expired
from rockroll.api.server.auth import Principal
from rockroll.api.server.caps import capped_sandbox, check_exec_timeout
from rockroll.api.server.deps import StateDep, Who
from rockroll.api.server.errors import ApiError, capacity_error
from rockroll.api.server.schemas import ExecRequest, SandboxCreate
from rockroll.api.server.state import AppState
from rockroll.client.responses import ExecOutput, FileWritten, SandboxInfo, SandboxList

__all__ = ["router"]

router = APIRouter(prefix="/v1/sandboxes", tags=["sandboxes"])
MAX_FILE_BYTES = 16 * 1024 * 1024


def _records(state: AppState) -> dict[str, tuple[str, float | None]]:
    """Each recorded sandbox's ``(owner, expires_at)``."""
    with state.db.session() as s:
        return {r.sandbox_id: (r.owner, r.expires_at) for r in s.scalars(select(SandboxOwner))}


def _owners(state: AppState) -> dict[str, str]:
    return {sid: owner for sid, (owner, _) in _records(state).items()}


def _visible(state: AppState, sandbox_id: str, who: Principal) -> Any:
    """The managed sandbox, or 404 when it does not exist, belongs to someone else or expired."""
    with state.db.session() as s:
        rec = s.get(SandboxOwner, sandbox_id)
    owner = rec.owner if rec is not None else ""
    if not (who.admin or (rec is not None and owner == who.owner)):
        raise ApiError(404, "sandbox_not_found", f"no sandbox {sandbox_id!r}")
    if rec is not None:
        check_not_expired(sandbox_id, rec.expires_at)
    try:
        return state.placement.get(sandbox_id)
    except LookupError as e:
        raise ApiError(404, "sandbox_not_found", f"no sandbox {sandbox_id!r}") from e


def _view(state: AppState, sb: Any, record: tuple[str, float | None]) -> dict[str, Any]:
    view = state.placement.describe(sb)
    view["owner"], view["expires_at"] = record
    return view


@router.post("", status_code=201, response_model=SandboxInfo)
def create_sandbox(body: SandboxCreate, state: StateDep, who: Who) -> dict[str, Any]:
    """Start a sandbox for the caller and wait until it is ready (422 ``over_cap`` beyond the server's caps)."""
    body = capped_sandbox(body, state.settings, who.owner)
    owned = [sid for sid, owner in _owners(state).items() if owner == who.owner]
    live = {sb.id for sb in state.placement.list()}
    held = sum(1 for sid in owned if sid in live)
    limit = state.settings.max_sandboxes_per_owner
    if held >= limit:
        raise capacity_error(f"{who.owner} holds {held} sandboxes, the limit; delete one first", held, limit,
                             "sandboxes per owner")  # fmt: skip
    fields = body.model_dump(exclude_none=True, exclude={"ttl_s"})
    sb = state.placement.create_sandbox(**fields)
    expires_at = time.time() + body.ttl_s  # its lifetime starts once it is ready (rockroll.api.sandboxes.ttl)
    with state.db.session() as s:
        s.add(SandboxOwner(sandbox_id=sb.id, owner=who.owner, expires_at=expires_at))
    return _view(state, sb, (who.owner, expires_at))


@router.get("", response_model=SandboxList)
def list_sandboxes(
    state: StateDep,
    who: Who,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """The caller's sandboxes (every sandbox, pooled ones included, for admins): ``limit`` from ``offset`` on."""
    records = _records(state)
    now = time.time()
    mine = []
    for sb in state.placement.list():
        owner, expires_at = records.get(sb.id, ("", None))
        if (who.admin or (owner and owner == who.owner)) and (expires_at is None or expires_at > now):
            mine.append(sb)  # an expired one is left out: the reaper is stopping it
    return {"sandboxes": [_view(state, sb, records.get(sb.id, ("", None))) for sb in mine[offset : offset + limit]]}


@router.get("/{sandbox_id}", response_model=SandboxInfo)
def show_sandbox(sandbox_id: str, state: StateDep, who: Who) -> dict:
    """One sandbox: state, health, uptime, restarts, CPU/memory, sessions."""
    sb = _visible(state, sandbox_id, who)
    return _view(state, sb, _records(state).get(sb.id, ("", None)))


@router.delete("/{sandbox_id}", status_code=204)
def delete_sandbox(sandbox_id: str, state: StateDep, who: Who) -> None:
    """Stop and remove a sandbox."""
    _visible(state, sandbox_id, who)
    state.placement.delete(sandbox_id)
    with state.db.session() as s:
        rec = s.get(SandboxOwner, sandbox_id)
        if rec is not None:
            s.delete(rec)


@router.post("/{sandbox_id}/restart", response_model=SandboxInfo)
def restart_sandbox(sandbox_id: str, state: StateDep, who: Who) -> dict[str, Any]:
    """Replace the sandbox with a fresh one under the same id (its sessions are lost)."""
    _visible(state, sandbox_id, who)
    sb = state.placement.restart(sandbox_id)
    return _view(state, sb, _records(state).get(sb.id, ("", None)))


@router.post("/{sandbox_id}/exec", response_model=ExecOutput)
async def exec_in_sandbox(
    sandbox_id: str, body: ExecRequest, state: StateDep, who: Who, calls: CallsDep
) -> dict[str, Any]:
    """Run a command; a timeout or OOM kill is a result (``timed_out``/``oom_killed``), not an error.

    Runs on a thread of its own, within the caller's quota of running calls (429 beyond it).
    """
    if isinstance(body.cmd, list) and not body.cmd:
        raise ApiError(400, "bad_request", "cmd must not be empty")
    check_exec_timeout(body.timeout_s, state.settings)

    def run() -> dict[str, Any]:
        sb = _visible(state, sandbox_id, who)
        res = sb.exec(
            body.cmd, timeout_s=body.timeout_s, cwd=body.cwd, env=body.env, stdin=body.stdin, max_output=body.max_output
        )
        return res.to_dict()

    return await calls.run(who.owner, run)


@router.get("/{sandbox_id}/files", response_class=Response)
async def read_file(
    sandbox_id: str,
    path: Annotated[str, Query(min_length=1, max_length=4096)],
    state: StateDep,
    who: Who,
    calls: CallsDep,
) -> Response:
    """The file's bytes (``application/octet-stream``): a regular file of at most ``max_file_bytes`` (413 beyond)."""
    cfg = state.settings

    def read() -> bytes:
        sb = _visible(state, sandbox_id, who)
        return sb.read_file(path, cfg.max_file_bytes, timeout_s=cfg.file_call_timeout_s)

    return Response(await calls.run(who.owner, read), media_type="application/octet-stream")


@router.put("/{sandbox_id}/files", response_model=FileWritten)
async def write_file(
    sandbox_id: str,
    request: Request,
    path: Annotated[str, Query(min_length=1, max_length=4096)],
    state: StateDep,
    who: Who,
    calls: CallsDep,
) -> dict:
    """Write the request body (at most ``max_file_bytes``, 413 beyond) to ``path`` in the workspace."""
    cfg = state.settings
    calls.acquire(who.owner)  # before the body: an owner's uploads held in memory count against the quota too
    try:
        data = await _body(request, cfg.max_file_bytes)
    except BaseException:
        calls.release(who.owner)
        raise

    def write() -> int:
        sb = _visible(state, sandbox_id, who)
        return sb.write_file(path, data, timeout_s=cfg.file_call_timeout_s)

    return {"path": path, "size": await calls.run_admitted(who.owner, write)}


async def _body(request: Request, limit: int) -> bytes:
    """The request body, or 413 naming the cap once it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(
                413, "too_large", f"file exceeds the cap of {limit} bytes (max_file_bytes)", {"limit": limit}
            )
        chunks.append(chunk)
    return b"".join(chunks)
