"""``OpenEnvSource``: an OpenEnv env server played as a rockroll env source, and the ``openenv`` source kind.

An OpenEnv env server (``openenv-core``'s ``create_app``, a Hugging Face Space, rockroll's own ``/openenv/<id>``
face) serves one env at a base URL: ``GET /schema`` and ``/metadata`` describe it, and each WebSocket on ``/ws``
is one session of JSON frames (``reset``, ``step``, ``state``, ``close``; answers ``observation``, ``state``,
``error``). :class:`OpenEnvEnv` is one such session with the text-env contract
(:class:`~rockroll.envs.core.TextEnvProtocol`), so env managers, rollouts and evals play it like any env:

* the agent's text goes in the action's one string field (``message`` of OpenEnv's echo and TextArena envs;
  the action schema's only required string field, else the env kwarg ``action_field`` names it);
* the observation text is the observation's one string field (else ``observation_field``; with none, the
  observation object as JSON); ``reward`` None counts 0; ``done`` is ``terminated``, or ``truncated`` when the
  observation says ``truncated: true`` (rockroll's face does);
* ``info``: the observation's ``info`` object when it has one (rockroll's face: the env's own info), else its
  other fields; ``action_is_valid`` and ``action_is_effective`` default to true and ``success`` to
  ``done and reward > 0``;
* ``system_prompt()``: ``/metadata``'s ``readme_content`` (rockroll's face puts the env's prompt there), else
  its ``description``; ``get_state()``: the session's ``state``; ``set_state`` is not in OpenEnv's protocol.

An eval config names it ``source: {kind: openenv, url: http://HOST:8000}``; every env id is then played at that
URL (the id names the report's rows), unless the URL holds ``{env}``, replaced by each id
(``http://HOST:8080/openenv/{env}`` plays a rockroll control plane's envs through its OpenEnv face). A token
is sent (``Authorization: Bearer``) only when the config names ``token_env`` itself, so a rockroll token never
goes to a third-party server by default; credentials in the URL (``http://user:TOKEN@host``) are sent as HTTP
Basic. Error frames raise :class:`OpenEnvError` with the HTTP status their code stands for (``VALIDATION_ERROR``
422: the run is misconfigured; ``EXECUTION_ERROR`` 500, ``CAPACITY_REACHED`` 429: infra, retried).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from rockroll.agentrl.sources.kinds import EnvSource
from rockroll.envhub.errors import UnknownEnvError
from rockroll.envs.errors import EnvConfigError
from rockroll.envs.tools import Action, Tool
from rockroll.sandbox.errors import StatusError

__all__ = ["OpenEnvSource", "OpenEnvEnv", "OpenEnvServer", "OpenEnvError", "open_openenv_source", "ENV_KWARGS"]

#: env kwargs the source takes (an OpenEnv env has no constructor kwargs over the wire)
ENV_KWARGS = ("action_field", "observation_field")
#: the HTTP status each OpenEnv error code stands for (what decides infra or fatal, rockroll.agentrl.errors)
_CODE_STATUS = {
    "INVALID_JSON": 400,
    "UNKNOWN_TYPE": 400,
    "VALIDATION_ERROR": 422,
    "EXECUTION_ERROR": 500,
    "CAPACITY_REACHED": 429,
    "FACTORY_ERROR": 503,
    "SESSION_ERROR": 503,
}
_RESERVED_OBS = ("done", "reward", "metadata")


class OpenEnvError(StatusError, RuntimeError):
    """An OpenEnv server's error: an HTTP answer, or an ``error`` frame (``code``: OpenEnv's, e.g. ``VALIDATION_ERROR``)."""

    @classmethod
    def from_frame(cls, data: dict[str, Any]) -> OpenEnvError:
        code = str(data.get("code") or "UNKNOWN")
        status = data.get("status")  # rockroll's face says which; other servers: what the code stands for
        status = status if isinstance(status, int) and not isinstance(status, bool) else _CODE_STATUS.get(code, 500)
        details = {k: v for k, v in data.items() if k not in ("message", "code")}
        return cls(status, code, str(data.get("message") or code), details)


def _http_url(url: str) -> str:
    url = url.strip().rstrip("/")
    for ws, http in (("ws://", "http://"), ("wss://", "https://")):
        if url.startswith(ws):
            return http + url[len(ws) :]
    return url if "://" in url else f"http://{url}"


def _string_fields(schema: dict[str, Any], skip: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """A JSON schema's string properties (``skip`` left out), and those of them it requires."""
    props = schema.get("properties") or {}
    names = [k for k, v in props.items() if k not in skip and isinstance(v, dict) and v.get("type") == "string"]
    return names, [k for k in schema.get("required") or () if k in names]


@dataclass(frozen=True)
class OpenEnvServer:
    """One OpenEnv env server as the source plays it: where, which fields carry the text, the system prompt."""

    url: str  # the http(s) base URL
    action_field: str
    observation_field: str | None  # None: the observation object as JSON text
    prompt: str

    @property
    def ws_url(self) -> str:
        return "ws" + self.url[len("http") :] + "/ws"


class OpenEnvEnv:
    """One session (one WebSocket) of an OpenEnv env server, with the text-env contract (module docstring)."""

    def __init__(self, server: OpenEnvServer, headers: dict[str, str], *, timeout_s: float, open_timeout_s: float):
        self.server = server
        self.timeout_s = timeout_s
        try:
            opening = connect(
                server.ws_url, additional_headers=headers, open_timeout=open_timeout_s, max_size=100 * 2**20
            )
            self._ws: ClientConnection | None = opening.__enter__()  # entered: websockets 17 warns otherwise
        except InvalidStatus as e:
            status = e.response.status_code
            raise OpenEnvError(status, "refused", f"{server.ws_url} refused the session: HTTP {status}") from e

    def _call(self, frame: dict[str, Any]) -> dict[str, Any]:
        if self._ws is None:
            raise OpenEnvError(409, "closed", "this OpenEnv session is closed")
        try:
            self._ws.send(json.dumps(frame))
            message = json.loads(self._ws.recv(timeout=self.timeout_s))
        except (WebSocketException, TimeoutError, ValueError) as e:  # its answer may still come: never read it
            self.close()
            if isinstance(e, WebSocketException):
                raise ConnectionError(f"the OpenEnv session at {self.server.ws_url} broke: {e}") from e
            raise
        if not isinstance(message, dict):
            raise OpenEnvError(502, "bad_answer", f"{self.server.ws_url} answered a non-object frame")
        if message.get("type") == "error":
            raise OpenEnvError.from_frame(message.get("data") or {})
        data: dict[str, Any] = message.get("data") or {}
        return data

    def _outcome(self, data: dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs = data.get("observation") or {}
        field = self.server.observation_field
        text = obs.get(field) if field else None
        text = text if isinstance(text, str) else json.dumps(obs, sort_keys=True, default=str)
        done, reward = bool(data.get("done")), float(data.get("reward") or 0.0)
        truncated = done and obs.get("truncated") is True
        info = dict(obs["info"]) if isinstance(obs.get("info"), dict) else {
            k: v for k, v in obs.items() if k not in (field, "truncated")
        }  # fmt: skip
        info.setdefault("action_is_valid", True)
        info.setdefault("action_is_effective", True)
        info.setdefault("success", done and reward > 0)
        return text, reward, done and not truncated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        data: dict[str, Any] = {} if seed is None else {"seed": seed}
        if options:
            data["options"] = options
        text, _reward, _terminated, _truncated, info = self._outcome(self._call({"type": "reset", "data": data}))
        return text, info

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if isinstance(action, str):
            data: dict[str, Any] = {self.server.action_field: action}
        else:  # a turn with tool calls: its text, and the calls beside it (as rockroll's own face takes them)
            data = {self.server.action_field: action.text}
            if action.calls:
                data["tool_calls"] = [c.to_dict() for c in action.calls]
        return self._outcome(self._call({"type": "step", "data": data}))

    @property
    def tools(self) -> tuple[Tool, ...]:
        """None: OpenEnv's session protocol lists no tools."""
        return ()

    def get_state(self) -> dict[str, Any]:
        return self._call({"type": "state"})

    def set_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError("OpenEnv's protocol restores no snapshots (an OpenEnv session cannot be forked)")

    def system_prompt(self) -> str:
        return self.server.prompt

    def action_candidates(self) -> list[str]:
        return []

    def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(WebSocketException, OSError):
                ws.send(json.dumps({"type": "close"}))
            ws.close()


class OpenEnvSource(EnvSource):
    """Sessions of OpenEnv env servers (see the module docstring).

    Args:
        url: the server's base URL (``http://``, ``https://``, ``ws://`` or ``wss://``); ``{env}`` in it is
            replaced by each env id.
        token: sent as ``Authorization: Bearer`` (None: no header; URL credentials still go as Basic).
        timeout_s: how long one reset or step may take.
        open_timeout_s: how long opening a session (the WebSocket handshake) may take.
    """

    name = "openenv"

    def __init__(self, url: str, *, token: str | None = None, timeout_s: float = 60.0, open_timeout_s: float = 10.0):
        super().__init__()
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout_s = timeout_s
        self.open_timeout_s = open_timeout_s
        self._described: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self._describe_lock = threading.Lock()

    def url_for(self, env_id: str) -> str:
        """The base URL that serves ``env_id``."""
        return _http_url(self.url.replace("{env}", env_id))

    def describe(self, env_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The server's ``/schema`` and ``/metadata`` (asked once per URL); ``UnknownEnvError`` on a 404."""
        url = self.url_for(env_id)
        with self._describe_lock:
            if url not in self._described:
                with httpx.Client(headers=self.headers, timeout=self.timeout_s) as http:
                    schema = self._get(http, url, "/schema", env_id)
                    metadata = self._get(http, url, "/metadata", env_id)
                self._described[url] = (schema, metadata)
            return self._described[url]

    @staticmethod
    def _get(http: httpx.Client, url: str, path: str, env_id: str) -> dict[str, Any]:
        r = http.get(url + path)
        if r.status_code == 404:
            raise UnknownEnvError(env_id, [])
        if r.status_code >= 400:
            raise OpenEnvError(r.status_code, "http_error", f"GET {url}{path}: HTTP {r.status_code}: {r.text[:300]}")
        body = r.json()
        return body if isinstance(body, dict) else {}

    def check_env(self, env_id: str) -> None:
        """The server for ``env_id`` answers its schema to this caller (``UnknownEnvError`` on a 404)."""
        self.describe(env_id)

    def server(self, env_id: str, kwargs: dict[str, Any]) -> OpenEnvServer:
        """How ``env_id`` is played (``kwargs``: ``action_field``, ``observation_field``); ``EnvConfigError`` when the
        action's text field cannot be told (or a kwarg is unknown)."""
        unknown = sorted(set(kwargs) - set(ENV_KWARGS))
        if unknown:
            raise EnvConfigError(f"an OpenEnv env takes only {', '.join(ENV_KWARGS)}; got {', '.join(unknown)}",
                                 env=env_id, param=unknown[0])  # fmt: skip
        schema, metadata = self.describe(env_id)
        action_field = kwargs.get("action_field")
        if not action_field:
            names, required = _string_fields(schema.get("action") or {}, ("metadata",))
            fits = required or names
            if len(fits) != 1:
                raise EnvConfigError(f"{env_id}: cannot tell which action field takes the agent's text (string fields: "
                                     f"{', '.join(names) or 'none'}); name it with the env kwarg action_field",
                                     env=env_id, param="action_field")  # fmt: skip
            action_field = fits[0]
        observation_field = kwargs.get("observation_field")
        if not observation_field:
            names, _required = _string_fields(schema.get("observation") or {}, _RESERVED_OBS)
            observation_field = names[0] if len(names) == 1 else None
        prompt = metadata.get("readme_content") or metadata.get("description") or ""
        return OpenEnvServer(self.url_for(env_id), str(action_field), observation_field, str(prompt))

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> OpenEnvEnv:
        server = self.server(env_id, kwargs)
        return OpenEnvEnv(server, self.headers, timeout_s=self.timeout_s, open_timeout_s=self.open_timeout_s)


@contextlib.contextmanager
def open_openenv_source(config: Any) -> Iterator[EnvSource]:
    """The source kind ``openenv``: ``config.url``; the token in ``$config.token_env`` only when the config names
    ``token_env`` itself (see the module docstring)."""
    named = "token_env" in getattr(config, "model_fields_set", ())
    token = os.environ.get(config.token_env) if named else None
    yield OpenEnvSource(config.url, token=token or None)
