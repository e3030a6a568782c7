"""The SGLang engine: an SGLang server (``python -m sglang.launch_server``) over its native HTTP API.

The same interface and weight-sync contract as :class:`~rockroll.agentrl.engines.vllm_engine.VLLMEngine`:

* generation: ``POST /generate`` with ``input_ids`` and ``return_logprob=true``; the reply's
  ``meta_info.output_token_logprobs`` holds ``(logprob, token_id, text)`` per generated token.
  SGLang returns logprobs after temperature scaling unless ``SGLANG_RETURN_ORIGINAL_LOGPROB=1``,
  which a launched server gets, so logprobs are the model's raw distribution.
* weight sync: :meth:`SGLangEngine.update_weights` takes a folder of ``*.safetensors`` or a state
  dict (staged as a safetensors file, :mod:`~rockroll.agentrl.engines.weight_sync`) and posts
  ``/update_weights_from_disk`` (SGLang waits for running requests, loads in place, flushes its
  cache), then ``/flush_cache``. SGLang's ``/update_weights_from_tensor`` is not used: it takes
  pickled tensor handles, which rockroll never sends, so ``weight_transport`` is ``"folder"`` only.
* sleep/wake: ``/release_memory_occupation`` and ``/resume_memory_occupation`` (a server
  launched with ``--enable-memory-saver``; ``sleep_mode=True`` adds it).
* a dead server (connection refused, reset) fails requests with
  :class:`~rockroll.agentrl.engines.base.EngineDeadError`; a server this engine launched is
  started again on the next call (``auto_restart``) or by :meth:`SGLangEngine.restart`, and the
  last weights are loaded into it again. A server given by ``base_url`` cannot be restarted here.

SGLang needs CUDA; it is not installed in this repository's CI, so the tests run this client
against a small fake of the HTTP API (``tests/agentrl/fake_sglang.py``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rockroll.agentrl.engines.base import EngineDeadError, EngineError, GenerationRequest, GenerationResult, LLMEngine
from rockroll.agentrl.engines.weight_sync import StagedWeights, stage_weights
from rockroll.agentrl.models.tiny import load_tokenizer

__all__ = ["SGLangEngine"]

_FINISH = {"stop": "stop", "length": "length", "abort": "aborted"}
INSTALL_HINT = "the sglang engine needs SGLang: pip install sglang (on a CUDA machine), or pass base_url= of a server"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SGLangEngine(LLMEngine):
    """An SGLang server behind the rockroll engine interface.

    Args:
        model_path: a Hugging Face model id or local directory (the tokenizer comes from it).
        base_url: an SGLang server already running; None: launch one on 127.0.0.1.
        tokenizer: a tokenizer object; None: loaded from ``model_path``.
        seed: the launched server's ``--random-seed``.
        python_executable: the python with SGLang; None: this interpreter (if it has SGLang).
        server_args: extra ``launch_server`` arguments (``["--tp-size", "2"]``).
        sleep_mode: launch with ``--enable-memory-saver`` (for :meth:`sleep`).
        auto_restart, startup_timeout_s, timeout_s: restart policy and time limits.
        workdir: staged weights and the server log; None: a temporary folder removed by :meth:`close`.
    """

    name = "sglang"

    def __init__(
        self,
        model_path: str | Path,
        *,
        base_url: str | None = None,
        tokenizer: Any = None,
        seed: int = 0,
        python_executable: str | Path | None = None,
        server_args: list[str] | None = None,
        sleep_mode: bool = False,
        auto_restart: bool = True,
        startup_timeout_s: float = 900.0,
        timeout_s: float = 600.0,
        workdir: str | Path | None = None,
    ) -> None:
        if base_url is None and python_executable is None and importlib.util.find_spec("sglang") is None:
            raise EngineError(INSTALL_HINT)
        self.model_path = str(model_path)
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model_path)
        eos = getattr(self.tokenizer, "eos_token_id", None)
        self.eos_token_id: int | None = int(eos) if eos is not None else None
        self.python = str(python_executable or sys.executable)
        self.seed = seed
        self.server_args = list(server_args or []) + (["--enable-memory-saver"] if sleep_mode else [])
        self.auto_restart = auto_restart
        self.startup_timeout_s = startup_timeout_s
        self.timeout_s = timeout_s
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="rockroll-sglang-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.weight_version = 0
        self.restarts = 0
        self._last_update: StagedWeights | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lifecycle = threading.Lock()
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.base_url = base_url.rstrip("/") if base_url else self._launch()

    # ------------------------------------------------------------ lifecycle
    @property
    def launched(self) -> bool:
        """Whether this engine started the server (and so can restart it)."""
        return self._proc is not None

    def _launch(self) -> str:
        port = _free_port()
        argv = [self.python, "-m", "sglang.launch_server", "--model-path", self.model_path, "--host", "127.0.0.1"]
        argv += ["--port", str(port), "--random-seed", str(self.seed), *self.server_args]
        env = {**os.environ, "SGLANG_RETURN_ORIGINAL_LOGPROB": os.environ.get("SGLANG_RETURN_ORIGINAL_LOGPROB", "1")}
        with open(self.workdir / "sglang-server.log", "ab") as log:
            self._proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        self._wait_healthy(url, self.startup_timeout_s)
        return url

    def _wait_healthy(self, url: str, timeout_s: float) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise EngineError(f"the SGLang server exited with code {self._proc.returncode}; see {self.workdir}")
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise EngineError(f"the SGLang server at {url} was not healthy within {timeout_s:.0f} s")

    def restart(self) -> None:
        """Start a new server (launched servers only) and load the current weights into it."""
        with self._lifecycle:
            self._restart_locked()

    def _restart_locked(self) -> None:
        if self._proc is None:
            raise EngineDeadError(f"the SGLang server at {self.base_url} is not reachable and was not launched here")
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self.base_url = self._launch()
        self.restarts += 1
        if self._last_update is not None:
            self._post_sync("/update_weights_from_disk", self._disk_body(self._last_update, self.weight_version))

    # ----------------------------------------------------------------- HTTP
    def _http(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:  # an httpx client belongs to one loop
            import httpx

            self._loop = loop
            self._client = httpx.AsyncClient(timeout=self.timeout_s)
        return self._client

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        for attempt in (0, 1):
            try:
                resp = await self._http().post(self.base_url + path, json=body)
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as e:
                if attempt or not (self.auto_restart and self.launched):
                    raise EngineDeadError(f"the SGLang server at {self.base_url} is unreachable: {e}") from e
                await asyncio.get_running_loop().run_in_executor(None, self.restart)
                continue
            return self._check(path, resp)
        raise EngineDeadError(f"the SGLang server at {self.base_url} is unreachable")  # not reached

    def _post_sync(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        try:
            resp = httpx.post(self.base_url + path, json=body, timeout=self.timeout_s)
        except httpx.TransportError as e:
            raise EngineDeadError(f"the SGLang server at {self.base_url} is unreachable: {e}") from e
        return self._check(path, resp)

    @staticmethod
    def _check(path: str, resp: Any) -> dict[str, Any]:
        data = (
            resp.json() if resp.content and resp.headers.get("content-type", "").startswith("application/json") else {}
        )
        if resp.status_code >= 400 or (isinstance(data, dict) and data.get("success") is False):
            raise EngineError(f"SGLang {path} -> {resp.status_code}: {resp.text[:500]}")
        return data if isinstance(data, dict) else {"data": data}

    # ----------------------------------------------------------- generation
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """One response through ``POST /generate`` (SGLang batches concurrent requests)."""
        if not request.prompt_ids:
            raise ValueError("prompt_ids must not be empty")
        sp = request.params
        sampling: dict[str, Any] = {
            "max_new_tokens": sp.max_new_tokens,
            "temperature": sp.temperature,
            "top_p": sp.top_p,
            "top_k": sp.top_k if sp.top_k > 0 else -1,
            "stop_token_ids": list(sp.stop_token_ids),
            "skip_special_tokens": False,
        }
        if sp.seed is not None:
            sampling["sampling_seed"] = sp.seed
        version = self.weight_version
        body = {"input_ids": list(request.prompt_ids), "sampling_params": sampling, "return_logprob": True}
        return self._result(await self._post("/generate", body), request, version)

    def _result(self, out: dict[str, Any], request: GenerationRequest, version: int) -> GenerationResult:
        meta = out.get("meta_info") or {}
        triples = meta.get("output_token_logprobs") or []
        ids = [int(t[1]) for t in triples]
        logprobs = [float("nan") if t[0] is None else float(t[0]) for t in triples]
        if not ids and out.get("output_ids"):
            ids = [int(t) for t in out["output_ids"]]
            logprobs = [float("nan")] * len(ids)
        reason = meta.get("finish_reason") or {}
        finish = _FINISH.get(str(reason.get("type") if isinstance(reason, dict) else reason), "stop")
        stops = set(request.params.stop_token_ids) | ({self.eos_token_id} if self.eos_token_id is not None else set())
        matched = reason.get("matched") if isinstance(reason, dict) else None
        if finish == "stop" and stops and (not ids or ids[-1] not in stops) and not isinstance(matched, str):
            ids.append(int(matched) if isinstance(matched, int) else int(self.eos_token_id or next(iter(stops))))
            logprobs.append(float("nan"))
        return GenerationResult(
            token_ids=ids,
            logprobs=logprobs,
            finish_reason=finish,  # type: ignore[arg-type]
            weight_version=int(served) if str(served := meta.get("weight_version", "")).isdigit() else version,
            logprobs_exact=not any(math.isnan(x) for x in logprobs),
        )

    # --------------------------------------------------------- weight sync
    @staticmethod
    def _disk_body(staged: StagedWeights, version: int) -> dict[str, Any]:
        return {"model_path": staged.path, "weight_version": str(int(version))}

    def update_weights(self, state_dict: Mapping[str, Any] | str | Path, version: int) -> None:  # type: ignore[override]
        """Load new weights (a state dict, or a folder of ``*.safetensors``) and tag later results
        with ``version``; SGLang applies them after its running requests finish."""
        staged = stage_weights(state_dict, "folder", self.workdir / "weights", version)
        with self._lifecycle:
            try:
                self._post_sync("/update_weights_from_disk", self._disk_body(staged, version))
            except EngineDeadError:
                if not (self.auto_restart and self.launched):
                    raise
                self._restart_locked()
                self._post_sync("/update_weights_from_disk", self._disk_body(staged, version))
            self._post_sync("/flush_cache", {})
            previous, self._last_update = self._last_update, staged
            self.weight_version = int(version)
        if previous is not None and previous.path and Path(previous.path).parent == self.workdir / "weights":
            if previous.path != staged.path:
                shutil.rmtree(previous.path, ignore_errors=True)

    async def update_weights_async(self, state_dict: Mapping[str, Any] | str | Path, version: int) -> None:  # type: ignore[override]
        await asyncio.get_running_loop().run_in_executor(None, self.update_weights, state_dict, version)

    def reset_prefix_cache(self) -> bool:
        """``/flush_cache`` (a weight update does this itself)."""
        self._post_sync("/flush_cache", {})
        return True

    def sleep(self, level: int = 1) -> bool:
        """Release the KV cache and weights (``/release_memory_occupation``); needs ``sleep_mode``.
        After waking, load weights again (SGLang drops them while asleep)."""
        self._post_sync("/release_memory_occupation", {})
        return True

    def wake_up(self) -> bool:
        """``/resume_memory_occupation``."""
        self._post_sync("/resume_memory_occupation", {})
        return True

    async def close(self) -> None:
        """Close the HTTP client; stop a launched server; remove the engine's own work folder."""
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            try:
                await client.aclose()
            except RuntimeError:  # its loop has ended; the connections went with it
                pass
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
