"""A small fake of SGLang's native HTTP API on 127.0.0.1, for the SGLang engine's tests.

Routes: ``GET /health``, ``POST /generate``, ``/update_weights_from_disk``, ``/flush_cache``,
``/release_memory_occupation``, ``/resume_memory_occupation``. Generation is deterministic: token
``i`` of a response is ``(last prompt id + i + 1) % 500`` with logprob ``-(i + 1) * scale``, where
``scale`` is the mean of the first tensor of the last weights loaded from disk (1.0 before any),
so a weight update visibly changes the logprobs. Runs in a thread (:func:`serve`) or as a script
standing in for ``python -m sglang.launch_server`` (it reads ``--port``).
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class FakeState:
    def __init__(self) -> None:
        self.scale = 1.0
        self.weight_version = "0"
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.asleep = False


def _load_scale(folder: str) -> float:
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no safetensors in {folder}")
    tensors = load_file(str(files[0]))
    first = tensors[sorted(tensors)[0]]
    return float(first.float().mean())


def _generate(state: FakeState, body: dict[str, Any]) -> dict[str, Any]:
    ids = body["input_ids"]
    sp = body.get("sampling_params") or {}
    n = int(sp.get("max_new_tokens", 8))
    out = [(ids[-1] + i + 1) % 500 for i in range(n)]
    stops = set(sp.get("stop_token_ids") or [])
    finish: dict[str, Any] = {"type": "length", "length": n}
    for i, tok in enumerate(out):
        if tok in stops:
            out, finish = out[: i + 1], {"type": "stop", "matched": tok}
            break
    lps = [[-(i + 1) * state.scale, tok, None] for i, tok in enumerate(out)]
    meta = {"output_token_logprobs": lps, "finish_reason": finish, "weight_version": state.weight_version}
    return {"text": "", "output_ids": out, "meta_info": meta}


def make_handler(state: FakeState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            return

        def _send(self, code: int, data: dict[str, Any]) -> None:
            raw = json.dumps(data).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._send(200, {"ok": True}) if self.path == "/health" else self._send(404, {"error": self.path})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            state.calls.append((self.path, body))
            if self.path == "/generate":
                self._send(200, _generate(state, body))
            elif self.path == "/update_weights_from_disk":
                try:
                    state.scale = _load_scale(body["model_path"])
                except (OSError, KeyError) as e:
                    self._send(400, {"success": False, "message": str(e), "num_paused_requests": 0})
                    return
                state.weight_version = str(body.get("weight_version", state.weight_version))
                self._send(200, {"success": True, "message": "ok", "num_paused_requests": 0})
            elif self.path in ("/flush_cache", "/release_memory_occupation", "/resume_memory_occupation"):
                state.asleep = self.path == "/release_memory_occupation"
                self._send(200, {})
            else:
                self._send(404, {"error": self.path})

    return Handler


def serve(port: int = 0) -> tuple[ThreadingHTTPServer, FakeState, str]:
    """Start the fake in a daemon thread; returns ``(server, state, base_url)``."""
    state = FakeState()
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, state, f"http://127.0.0.1:{server.server_address[1]}"


if __name__ == "__main__":
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(FakeState()))
    server.serve_forever()
