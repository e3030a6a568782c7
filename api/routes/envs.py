"""EnvHub routes: list, show, register (validated in a sandbox) and delete envs.

Custom env ids are namespaced by owner (``alice/Maze-v0``), so the routes that name one take a path;
what a caller may see, and how ids resolve, is :mod:`rockroll.api.envs.catalog`'s to say.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

from fastapi import APIRouter, Query

from rockroll.api.envs.catalog import CustomEnv
from rockroll.api.server.deps import StateDep, Who
from rockroll.api.server.errors import ApiError, to_api_error
from rockroll.api.server.schemas import EnvCreate
from rockroll.api.server.state import AppState
from rockroll.client.responses import EnvInfo, EnvList
from rockroll.envs.tools import check_tools

__all__ = ["router"]

router = APIRouter(prefix="/v1/envs", tags=["envs"])


@router.get("", response_model=EnvList)
def list_envs(
    state: StateDep,
    who: Who,
    tag: Annotated[str | None, Query(max_length=64)] = None,
) -> dict[str, Any]:
    """Every env the caller may see: built-in, public and its own custom envs (all of them for admins)."""
    return {"envs": state.catalog.list(who, tag)}


@router.get("/{name:path}", response_model=EnvInfo)
def show_env(name: str, state: StateDep, who: Who) -> dict:
    """One env by its exact id (a built-in ``Name`` alone gives its newest version); 404 when unseen."""
    return state.catalog.get(name, who)


@router.post("", status_code=201, response_model=EnvInfo)
def register_env(body: EnvCreate, state: StateDep, who: Who) -> dict:
    """Register a custom env in the caller's namespace after playing ``reset`` + one ``step`` in a sandbox."""
    env_id = state.catalog.namespaced(body.id, who.owner)
    source = None
    if body.source_b64 is not None:
        try:
            source = base64.b64decode(body.source_b64, validate=True)
        except (binascii.Error, ValueError) as e:
            raise ApiError(400, "invalid_env_spec", f"source_b64 is not valid base64: {e}") from e
        if len(source) > state.settings.max_upload_bytes:
            raise ApiError(413, "too_large", f"upload exceeds {state.settings.max_upload_bytes} bytes")
    env = CustomEnv(
        env_id=env_id,
        kind=body.kind,
        owner=who.owner,
        entry_point=body.entry_point,
        image=body.image,
        source_name=body.source_name,
        source=source,
        kwargs=body.kwargs,
        max_steps=body.max_steps,
        description=body.description,
        tags=list(body.tags),
        visibility=body.visibility,
    )
    state.catalog.check_new(env)
    reached = {"stage": "make"}
    try:
        report = validate_in_sandbox(state, env, reached)
    except Exception as e:
        state.placement.drop_custom_pool(env)
        mapped = to_api_error(e)
        message = mapped.message if mapped else f"{type(e).__name__}: {e}"
        raise ApiError(
            400,
            "env_validation_failed",
            f"{env.env_id} failed validation: {message}",
            {"stage": reached["stage"], "error_type": type(e).__name__},
        ) from e
    view = state.catalog.add(env)
    view["validation"] = report
    return view


def validate_in_sandbox(state: AppState, env: CustomEnv, reached: dict[str, str]) -> dict[str, object]:
    """Make one instance in a sandbox, play ``reset``, check the tools it declares (valid function schemas), and
    play one ``step`` (``reached["stage"]``: the stage it is at: make, reset, tools, step)."""
    session = state.placement.open_session(env.env_id, {}, custom=env)
    reached["stage"] = "reset"
    try:
        obs, _info = session.reset(seed=0)
        reached["stage"] = "tools"
        check_tools(session.tools)  # a tool env's schemas: EnvConfigError naming the field (tools[1].parameters)
        reached["stage"] = "step"
        candidates = session.action_candidates()
        action = f"<answer>{candidates[0]}</answer>" if candidates else "<answer></answer>"
        obs2, reward, terminated, truncated, _ = session.step(action)
        if not isinstance(obs, str) or not isinstance(obs2, str):
            raise TypeError(f"observations must be str, got {type(obs).__name__} and {type(obs2).__name__}")
        return {
            "sandbox_id": session.sandbox_id,
            "action": action,
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
        }
    finally:
        session.close()


@router.delete("/{name:path}", status_code=204)
def delete_env(name: str, state: StateDep, who: Who) -> None:
    """Delete a custom env (its owner or an admin) and stop its pool's sandboxes."""
    state.placement.drop_custom_pool(state.catalog.remove(name, who))
