"""OpenEnv's side of tests/api/test_openenv.py, run by the OpenEnv venv's python (``.venv-openenv``, built by
``scripts/setup-openenv.sh``): only ``openenv-core`` here, never rockroll.

It imports OpenEnv once (gradio makes that take seconds) and then answers commands, one JSON object per line
on stdin, each with one line ``@@ {"ok": true, "result": ...}`` (or ``"ok": false, "error": ...``) on stdout:

* ``serve_echo`` (``dir``): ``openenv init echo_env`` there, and serve the env it made with OpenEnv's own
  ``create_app`` on 127.0.0.1 (a thread of this process); the result is its URL.
* ``play`` (``url``, ``seed``, ``actions``): OpenEnv's ``GenericEnvClient`` resets, steps (each action is the
  action object) and asks the state.
* ``malformed`` (``url``): malformed frames on the client's own socket, each answer checked against OpenEnv's
  ``WSErrorResponse``, then a bad action through the client's API, then a good step and the state.
* ``validate`` (``url``): OpenEnv's runtime checker (``openenv validate --url``).
* ``connect`` (``url``): open the client's session; the result is the error, if any.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from openenv.core import GenericEnvClient
from openenv.core.env_server.types import WSErrorCode, WSErrorResponse, WSObservationResponse

MALFORMED = ["{not json", "[1, 2]", '{"type": "jump"}', '{"type": "step"}', '{"type": "step", "data": {"message": 7}}',
             '{"type": "reset", "data": {"seed": -1}}', '{"type": "state", "data": {}, "extra": 1}', "x" * 1_000_001]  # fmt: skip


def serve_echo(cmd: dict[str, Any]) -> str:
    from openenv.cli.commands.init import init

    init("echo_env", output_dir=cmd["dir"])  # OpenEnv's template env: it echoes the action's message
    sys.path.insert(0, str(Path(cmd["dir"]) / "echo_env"))
    import uvicorn
    from server.app import app  # type: ignore[import-not-found]  # the generated project's app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _result(r: Any) -> dict[str, Any]:
    return {"observation": r.observation, "reward": r.reward, "done": r.done}


async def play(cmd: dict[str, Any]) -> dict[str, Any]:
    async with GenericEnvClient(base_url=cmd["url"]) as env:
        first = await env.reset(seed=cmd.get("seed"))
        steps = [_result(await env.step(a)) for a in cmd.get("actions", [])]
        return {"reset": _result(first), "steps": steps, "state": await env.state()}


async def malformed(cmd: dict[str, Any]) -> dict[str, Any]:
    async with GenericEnvClient(base_url=cmd["url"]) as env:
        await env.reset(seed=0)
        answers = []
        for frame in MALFORMED:
            await env._ws.send(frame)  # the client's own socket: frames its API would never send
            answer = WSErrorResponse.model_validate_json(await env._ws.recv())  # OpenEnv's error shape, strictly
            answers.append({"frame": frame[:60], "code": WSErrorCode(answer.data["code"]).value, **answer.data})
        await env._ws.send(b"\x00\x01")
        answers.append({"frame": "<binary>", **WSErrorResponse.model_validate_json(await env._ws.recv()).data})
        try:
            await env.step({"msg": "<answer>Up</answer>"})  # a bad action through the client's API
            api_error = ""
        except RuntimeError as e:  # what OpenEnv's client makes of an error frame
            api_error = str(e)
        await env._ws.send(json.dumps({"type": "step", "data": {"message": "<answer>Up</answer>"}}))
        after = WSObservationResponse.model_validate_json(await env._ws.recv())  # the session lives on
        return {"answers": answers, "api_error": api_error, "after": after.data, "state": await env.state()}


async def connect(cmd: dict[str, Any]) -> str:
    env = GenericEnvClient(base_url=cmd["url"])
    try:
        await env.connect()
        await env.reset()
    except Exception as e:  # noqa: BLE001 - the refusal is the result
        return f"{type(e).__name__}: {e}"
    finally:
        await env.close()
    return ""


def run(cmd: dict[str, Any]) -> Any:
    op = cmd["op"]
    if op == "serve_echo":
        return serve_echo(cmd)
    if op == "validate":
        from openenv.cli._validation import validate_running_environment

        return validate_running_environment(cmd["url"], timeout_s=60.0)
    return asyncio.run({"play": play, "malformed": malformed, "connect": connect}[op](cmd))


def main() -> None:
    for line in sys.stdin:
        try:
            answer = {"ok": True, "result": run(json.loads(line))}
        except Exception as e:  # noqa: BLE001 - reported to the test
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        print("@@ " + json.dumps(answer, default=str), flush=True)


if __name__ == "__main__":
    main()
