"""The engine as a setting: one typed model per engine kind, chosen by ``kind``.

A training run's ``rollout.engine`` is one of these models: its ``kind`` picks the engine of
:data:`~rockroll.agentrl.engines.ENGINE_KINDS` and the other keys are that kind's options::

    engine: {kind: hf, max_batch_size: 256}
    engine: {kind: vllm, dtype: float32, max_model_len: 2048, weight_transport: bytes, cpu_threads: 1}
    engine: {kind: sglang, server_args: [--mem-fraction-static, "0.5"]}
    engine: {kind: openai, base_url: "http://127.0.0.1:8000"}   # no weight sync: evaluation only

An unknown kind, or an option the kind does not have, is a
:class:`~rockroll.envs.config.ConfigError` naming the dotted key and what it accepts. What the
caller owns (the model's weights or path, its tokenizer, the run's seed) is passed by the caller,
never set here: :func:`engine_options` gives the keyword arguments of
:func:`~rockroll.agentrl.engines.make_engine` that come from the config.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from rockroll.agentrl.engines.base import EngineError
from rockroll.envs.config import ConfigError, ConfigModel

__all__ = [
    "EngineConfig",
    "HFEngineConfig",
    "VLLMEngineConfig",
    "SGLangEngineConfig",
    "OpenAIEngineConfig",
    "ENGINE_CONFIGS",
    "engine_options",
    "check_engine_available",
    "VLLM_SETUP_HINT",
]

VLLM_SETUP_HINT = "vLLM is not installed: build its venv with `bash scripts/setup-vllm.sh` (CUDA: pip install vllm)"


class HFEngineConfig(ConfigModel):
    """transformers in the trainer's process (continuous batching, prefix reuse; CPU or CUDA)."""

    kind: Literal["hf"] = Field("hf", description="engine kind")
    max_batch_size: int = Field(256, ge=1, description="most requests decoded together")
    batch_wait_s: float = Field(0.003, ge=0, description="wait for more requests when idle before a batch starts")
    prefix_cache_mb: float = Field(256.0, ge=0, description="KV budget of the prefix cache (0: no prefix reuse)")
    fast_decoder: bool = Field(True, description="TorchScript forward for Qwen2/Llama models (False: transformers)")
    batch_path: bool = Field(True, description="decode a lock-step round as one batch where the model allows")


class VLLMEngineConfig(ConfigModel):
    """vLLM in a host process of its own venv (``.venv-vllm`` on CPU); weights synced after every update."""

    kind: Literal["vllm"] = Field("vllm", description="engine kind")
    dtype: str = Field(
        "float32",
        description="vLLM's dtype (auto: the checkpoint's); keep it equal to model.dtype, or the engine's "
        "logprobs drift from the trainer's (actor/logprob_gap_*)",
    )
    max_model_len: int | None = Field(2048, ge=1, description="longest prompt + response (null: the model's)")
    enforce_eager: bool = Field(True, description="no CUDA graphs / compilation (fast start; tiny models)")
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="GPU share for vLLM (null: vLLM's)")
    python_executable: str | None = Field(
        None, description="the python with vLLM (null: this interpreter if it has vLLM, else .venv-vllm/bin/python)"
    )
    weight_transport: Literal["folder", "bytes"] = Field(
        "bytes", description="how a state dict reaches the host: safetensors bytes on the pipe, or a file in a folder"
    )
    auto_restart: bool = Field(True, description="a dead host is started again (with the last weights) on next use")
    startup_timeout_s: float = Field(600.0, gt=0, description="longest wait for the host to build its engine")
    cpu_kv_cache_gb: float = Field(1.0, gt=0, description="VLLM_CPU_KVCACHE_SPACE (CPU builds)")
    cpu_threads: int | None = Field(1, ge=1, description="OMP_NUM_THREADS of the host (CPU builds; null: vLLM's)")
    sleep_mode: bool = Field(
        False, description="GPU: release the KV cache while the trainer updates (sleep/wake around each update)"
    )
    engine_kwargs: dict[str, Any] = Field({}, description="any other vllm.LLM argument (JSON values)")


class SGLangEngineConfig(ConfigModel):
    """SGLang over its HTTP API: a server it starts, or one at ``base_url``."""

    kind: Literal["sglang"] = Field("sglang", description="engine kind")
    base_url: str | None = Field(None, description="a running SGLang server (null: start one)")
    python_executable: str | None = Field(None, description="the python with SGLang (null: this interpreter)")
    server_args: list[str] = Field([], description="extra sglang.launch_server arguments")
    sleep_mode: bool = Field(False, description="start the server with --enable-memory-saver (sleep/wake)")
    auto_restart: bool = Field(True, description="a dead server is started again on next use")
    startup_timeout_s: float = Field(900.0, gt=0, description="longest wait for the server to start")
    timeout_s: float = Field(600.0, gt=0, description="longest wait for one request")


class OpenAIEngineConfig(ConfigModel):
    """Any OpenAI-compatible server; it takes no weight updates (evaluation, or total_steps: 0)."""

    kind: Literal["openai"] = Field("openai", description="engine kind")
    base_url: str = Field("http://127.0.0.1:8000", description="the server's URL")
    model: str | None = Field(None, description="model name on the server (null: the server's first)")
    timeout_s: float = Field(300.0, gt=0, description="longest wait for one request")
    max_concurrency: int = Field(256, ge=1, description="requests in flight at once")
    max_retries: int = Field(2, ge=0, description="retries of a failed request")


#: engine kind -> its options model (a kind registered in ENGINE_KINDS without one is usable through make_engine only)
ENGINE_CONFIGS: dict[str, type[ConfigModel]] = {
    "hf": HFEngineConfig,
    "vllm": VLLMEngineConfig,
    "sglang": SGLangEngineConfig,
    "openai": OpenAIEngineConfig,
}


def _kind(value: Any) -> str:
    """The member a value validates as: its ``kind`` (hf when absent)."""
    kind = value.get("kind", "hf") if isinstance(value, dict) else getattr(value, "kind", "hf")
    return str(kind)


#: ``rollout.engine``: the options of one engine kind, picked by ``kind`` (default hf)
EngineConfig = Annotated[
    Annotated[HFEngineConfig, Tag("hf")]
    | Annotated[VLLMEngineConfig, Tag("vllm")]
    | Annotated[SGLangEngineConfig, Tag("sglang")]
    | Annotated[OpenAIEngineConfig, Tag("openai")],
    Discriminator(
        _kind,
        custom_error_type="choice",
        custom_error_message="kind must be one of hf, vllm, sglang, openai",
        custom_error_context={"choices": ", ".join(ENGINE_CONFIGS), "field": "kind"},
    ),
]


def engine_options(config: Any) -> dict[str, Any]:
    """The keyword arguments of ``make_engine(config.kind, ...)`` that the config holds (kind left out)."""
    options = config.model_dump(exclude={"kind"})
    options.update(options.pop("engine_kwargs", None) or {})
    return options


def check_engine_available(config: Any, key: str = "rollout.engine") -> None:
    """Raise a one-line :class:`ConfigError` when the engine ``config`` asks for cannot run here (vLLM missing)."""
    if config.kind == "vllm":
        from rockroll.agentrl.engines.vllm_engine import find_vllm_python

        try:
            find_vllm_python(config.python_executable)
        except EngineError as e:
            raise ConfigError(f"{key}.kind", f"{key}.kind: vllm: {VLLM_SETUP_HINT}", value="vllm") from e
