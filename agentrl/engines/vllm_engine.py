"""The vLLM engine: vLLM runs in its own process, with the python of the venv that holds it.

vLLM pins its own transformers, fastapi and numpy, so it lives in a venv of its own
(``.venv-vllm``, built by ``bash scripts/setup-vllm.sh``; on a CUDA machine any venv with
``pip install vllm``). :class:`VLLMEngine` starts ``python -m rockroll.agentrl.engines.vllm_host``
there and talks to it over a pipe (:mod:`~rockroll.agentrl.engines.host_protocol`): token ids in,
token ids and their logprobs out. vLLM batches concurrent requests (continuous batching); logprobs
are raw (the model's distribution before temperature/top-k/top-p), as the engine contract says.

Weight sync (:meth:`VLLMEngine.update_weights`): the trainer passes a folder of ``*.safetensors``
files or a state dict, which is staged as a safetensors file in the engine's work folder or, with
``weight_transport="bytes"``, sent as that file's bytes (:mod:`~rockroll.agentrl.engines.weight_sync`).
In the host, a worker-extension method called by name reloads the weights in place, refreshes a
tied output layer and resets the prefix cache (:mod:`~rockroll.agentrl.engines.vllm_worker_ext`).
The update runs after the requests already sent have finished; requests sent after it wait for
it. Each result names the weight version that generated it.

A dead host (killed, out of memory, a broken engine) fails its requests with
:class:`~rockroll.agentrl.engines.base.EngineDeadError` (an infra failure); the next call starts
a new host (``auto_restart=True``) or :meth:`VLLMEngine.restart` does, and the last weights are
loaded into it again, so the run goes on with the same policy.

Sleep mode (release the KV cache and weights while the trainer updates): :meth:`VLLMEngine.sleep`
and :meth:`VLLMEngine.wake_up` on a GPU host started with ``sleep_mode=True``; vLLM's CPU worker
has none, so there both return False and change nothing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rockroll.agentrl.engines.base import EngineError, GenerationRequest, GenerationResult, LLMEngine
from rockroll.agentrl.engines.host_client import HostProcess
from rockroll.agentrl.engines.weight_sync import StagedWeights, Transport, stage_weights
from rockroll.agentrl.models.tiny import load_tokenizer

__all__ = ["VLLMEngine", "find_vllm_python", "REPO_ROOT"]

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = (
    "the vllm engine needs vLLM: pip install vllm into this interpreter (CUDA machines), or build the "
    "CPU venv beside it: bash scripts/setup-vllm.sh (or pass python_executable=...)"
)
_FINISH = {"stop": "stop", "length": "length", "abort": "aborted"}


def find_vllm_python(explicit: str | Path | None = None, root: str | Path = REPO_ROOT) -> str:
    """The python that runs the vLLM host: ``explicit``; else this interpreter when it has vLLM;
    else ``root/.venv-vllm/bin/python``; else :class:`EngineError` saying how to install it."""
    if explicit is not None:
        if not Path(explicit).is_file():
            raise EngineError(f"python_executable {explicit} does not exist; {INSTALL_HINT}")
        return str(explicit)
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    venv_python = Path(root) / ".venv-vllm" / "bin" / "python"
    if venv_python.is_file():
        return str(venv_python)
    raise EngineError(INSTALL_HINT)


class VLLMEngine(LLMEngine):
    """vLLM in a host process behind the rockroll engine interface.

    Args:
        model_path: a Hugging Face model id or local directory.
        tokenizer: a tokenizer object; None: loaded from ``model_path``.
        seed, dtype, max_model_len, enforce_eager, gpu_memory_utilization: ``vllm.LLM`` arguments
            (None: vLLM's default); ``engine_kwargs``: any other ``vllm.LLM`` argument (JSON values).
        python_executable: the python with vLLM (see :func:`find_vllm_python`).
        weight_transport: how a state dict reaches the host: ``"folder"`` (a safetensors file in
            ``workdir``) or ``"bytes"`` (the file's bytes through the pipe; no disk).
        auto_restart: start a new host on the next call after the host died.
        startup_timeout_s: longest wait for the host to build its engine.
        cpu_kv_cache_gb, cpu_threads: ``VLLM_CPU_KVCACHE_SPACE`` and ``OMP_NUM_THREADS`` (CPU builds).
        sleep_mode: build the engine with ``enable_sleep_mode`` (GPU only; see :meth:`sleep`).
        env: extra environment variables for the host.
        workdir: staged weights and the host's log; None: a temporary folder removed by :meth:`close`.
    """

    name = "vllm"

    def __init__(
        self,
        model_path: str | Path,
        *,
        tokenizer: Any = None,
        seed: int = 0,
        dtype: str = "auto",
        max_model_len: int | None = None,
        enforce_eager: bool = False,
        gpu_memory_utilization: float | None = None,
        python_executable: str | Path | None = None,
        weight_transport: Transport = "folder",
        auto_restart: bool = True,
        startup_timeout_s: float = 600.0,
        cpu_kv_cache_gb: float = 1.0,
        cpu_threads: int | None = None,
        sleep_mode: bool = False,
        env: Mapping[str, str] | None = None,
        workdir: str | Path | None = None,
        **engine_kwargs: Any,
    ) -> None:
        if weight_transport not in ("folder", "bytes"):
            raise ValueError(f"weight_transport must be 'folder' or 'bytes', got {weight_transport!r}")
        self.python = find_vllm_python(python_executable)
        self.model_path = str(model_path)
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model_path)
        eos = getattr(self.tokenizer, "eos_token_id", None)
        self.eos_token_id: int | None = int(eos) if eos is not None else None
        self.weight_transport: Transport = weight_transport
        self.auto_restart = auto_restart
        self.startup_timeout_s = startup_timeout_s
        self.sleep_mode = sleep_mode
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="rockroll-vllm-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        llm_kwargs: dict[str, Any] = {"seed": seed, "dtype": dtype, "enforce_eager": enforce_eager, **engine_kwargs}
        if max_model_len is not None:
            llm_kwargs["max_model_len"] = max_model_len
        if gpu_memory_utilization is not None:
            llm_kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        self.llm_kwargs = llm_kwargs
        self.env = {
            **os.environ,
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            "VLLM_CPU_KVCACHE_SPACE": f"{cpu_kv_cache_gb:g}",
        }
        if cpu_threads is not None:
            self.env["OMP_NUM_THREADS"] = str(cpu_threads)
        self.env.update(env or {})
        self.weight_version = 0
        self.restarts = 0
        #: the last update's facts: host load ``seconds``, ``tensors``, ``tied_refreshed``, ``staging_seconds``
        self.last_update: dict[str, Any] = {}
        self._last_update: StagedWeights | None = None
        self._lifecycle = threading.Lock()  # one start/restart/update at a time
        self._host = self._start_host()

    # ------------------------------------------------------------ lifecycle
    @property
    def facts(self) -> dict[str, Any]:
        """What the host reported when it started (device, vLLM version, can_sleep, pid ...)."""
        return dict(self._host.facts)

    @property
    def pid(self) -> int | None:
        """The host process's id (tests kill it to check restarts)."""
        return self._host.pid

    @property
    def alive(self) -> bool:
        """Whether the host process runs (a dead one is restarted by the next call or :meth:`restart`)."""
        return self._host.alive

    @property
    def in_flight(self) -> int:
        """Requests sent to the host and not answered yet."""
        return self._host.in_flight

    def wait_host_exited(self, timeout_s: float) -> bool:
        """Wait until the current host process has exited (tests kill it); False on timeout."""
        return self._host.wait_exited(timeout_s)

    @property
    def log_path(self) -> Path:
        return self.workdir / "vllm-host.log"

    def _start_host(self) -> HostProcess:
        config = {"model": self.model_path, "engine_kwargs": self.llm_kwargs, "sleep_mode": self.sleep_mode}
        argv = [self.python, "-m", "rockroll.agentrl.engines.vllm_host", json.dumps(config)]
        host = HostProcess(argv, env=self.env, log_path=self.log_path, name="vllm host")
        host.start(self.startup_timeout_s)
        if self._last_update is not None:  # a restart: load the policy the run had reached
            update = self._last_update
            host.call(update.message(self.weight_version), update.blob).result(timeout=self.startup_timeout_s)
        return host

    def restart(self) -> None:
        """Stop the host (if it still runs) and start a new one with the current weights."""
        with self._lifecycle:
            self._host.kill()
            self._host = self._start_host()
            self.restarts += 1

    def _restart_if_dead(self) -> HostProcess:
        with self._lifecycle:
            if not self._host.alive:
                if not self.auto_restart:
                    raise self._host.dead_error()
                self._host = self._start_host()
                self.restarts += 1
            return self._host

    async def _live_host(self) -> HostProcess:
        host = self._host
        if host.alive:
            return host
        return await asyncio.get_running_loop().run_in_executor(None, self._restart_if_dead)

    async def _call(self, message: dict[str, Any], blob: bytes = b"") -> dict[str, Any]:
        host = await self._live_host()
        return await asyncio.wrap_future(host.call(message, blob))

    def _call_sync(self, message: dict[str, Any], blob: bytes = b"", timeout_s: float | None = None) -> dict[str, Any]:
        host = self._host if self._host.alive else self._restart_if_dead()
        return host.call(message, blob).result(timeout=timeout_s)

    # ----------------------------------------------------------- generation
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate one response; concurrent calls are batched by vLLM in the host."""
        if not request.prompt_ids:
            raise ValueError("prompt_ids must not be empty")
        sp = request.params
        params = {
            "max_tokens": sp.max_new_tokens,
            "temperature": sp.temperature,
            "top_p": sp.top_p,
            "top_k": sp.top_k,
            "seed": sp.seed,
            "stop_token_ids": list(sp.stop_token_ids),
        }
        out = await self._call({"op": "generate", "prompt_ids": list(request.prompt_ids), "params": params})
        return self._result(out, request)

    def _result(self, out: dict[str, Any], request: GenerationRequest) -> GenerationResult:
        ids = [int(t) for t in out["token_ids"]]
        logprobs = [float("nan") if x is None else float(x) for x in out["logprobs"]]
        finish = _FINISH.get(str(out.get("finish_reason")), "stop")
        stops = set(request.params.stop_token_ids) | ({self.eos_token_id} if self.eos_token_id is not None else set())
        if finish == "stop" and stops and (not ids or ids[-1] not in stops):  # a stop the engine left out
            stop = out.get("stop_token")
            ids.append(int(stop) if isinstance(stop, int) else int(self.eos_token_id or next(iter(stops))))
            logprobs.append(float("nan"))
        return GenerationResult(
            token_ids=ids,
            logprobs=logprobs,
            finish_reason=finish,  # type: ignore[arg-type]
            weight_version=int(out.get("weight_version", self.weight_version)),
            logprobs_exact=not any(math.isnan(x) for x in logprobs),
        )

    # --------------------------------------------------------- weight sync
    def update_weights(self, state_dict: Mapping[str, Any] | str | Path, version: int) -> None:  # type: ignore[override]
        """Load new weights (a state dict, or a folder of ``*.safetensors``) and tag later results
        with ``version``. Blocks until the host has loaded them (after the requests sent before)."""
        staged = stage_weights(state_dict, self.weight_transport, self.workdir / "weights", version)
        reply = self._call_sync(staged.message(version), staged.blob)
        previous, self._last_update = self._last_update, staged
        self.weight_version = int(version)
        self.last_update = {
            **reply,
            "staging_seconds": staged.seconds,
            "transport": "bytes" if staged.blob else "folder",
        }
        self._drop_staged(previous, keep=staged)

    async def update_weights_async(self, state_dict: Mapping[str, Any] | str | Path, version: int) -> None:  # type: ignore[override]
        """:meth:`update_weights` without blocking the event loop."""
        await asyncio.get_running_loop().run_in_executor(None, self.update_weights, state_dict, version)

    def _drop_staged(self, previous: StagedWeights | None, keep: StagedWeights) -> None:
        """Remove the previous staged folder (only ones this engine wrote, never the trainer's)."""
        if previous is None or previous.path is None or previous.path == keep.path:
            return
        staged_root = (self.workdir / "weights").resolve()
        if Path(previous.path).resolve().parent == staged_root:
            shutil.rmtree(previous.path, ignore_errors=True)

    def reset_prefix_cache(self) -> bool:
        """Drop cached KV blocks (a weight update does this itself)."""
        return bool(self._call_sync({"op": "reset_prefix_cache"}).get("reset"))

    def sleep(self, level: int = 1) -> bool:
        """Release the KV cache (level 1: weights offloaded to CPU; level 2: weights dropped too, so
        load weights after :meth:`wake_up`). False where sleep mode is unavailable (CPU hosts, or
        ``sleep_mode=False``): nothing changed, generation goes on as before."""
        return bool(self._call_sync({"op": "sleep", "level": int(level)}).get("done"))

    def wake_up(self) -> bool:
        """Undo :meth:`sleep`; False where sleep mode is unavailable."""
        return bool(self._call_sync({"op": "wake_up"}).get("done"))

    async def close(self) -> None:
        """Stop the host and remove the engine's own work folder."""
        await asyncio.get_running_loop().run_in_executor(None, self._host.stop)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
