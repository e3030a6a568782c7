"""``rockroll model ...`` and ``rockroll serve-model``: build the tiny local model, serve a model.

Mounted in :mod:`rockroll.cli.main`. Heavy imports (torch, transformers, uvicorn) happen inside the
commands, so ``rockroll --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["model_app", "serve_model_cmd"]

model_app = typer.Typer(help="Local LLMs for rollout: build the tiny test model.", no_args_is_help=True)


@model_app.command("build-tiny")
def build_tiny(
    out_dir: Path = typer.Argument(..., help="Directory to write the model and tokenizer to (Hugging Face format)."),
    hidden_size: int = typer.Option(128, help="Width of the residual stream."),
    layers: int = typer.Option(2, help="Number of transformer blocks."),
    heads: int = typer.Option(4, help="Number of attention heads."),
    kv_heads: int = typer.Option(2, help="Number of key/value heads."),
    vocab_size: int = typer.Option(512, help="Target BPE vocabulary size."),
    seed: int = typer.Option(0, help="Seed of the random initialisation and the tokenizer corpus."),
) -> None:
    """Build a tiny randomly initialised Qwen2-shaped LM and a BPE tokenizer trained on env text.

    Example:

        rockroll model build-tiny /tmp/tiny --layers 2 --hidden-size 128
    """
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    try:
        cfg = TinyModelConfig(
            hidden_size=hidden_size,
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=kv_heads,
            vocab_size=vocab_size,
            seed=seed,
        )
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e
    path = build_tiny_model(out_dir, cfg)
    typer.echo(f"tiny model written to {path}")


def serve_model_cmd(
    model_path: str = typer.Argument(
        ..., help="A local Hugging Face model directory (e.g. one from `model build-tiny`)."
    ),
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8001, help="Port to listen on."),
    device: str = typer.Option("cpu", help="Torch device: cpu, cuda, cuda:1, ..."),
    model_name: str | None = typer.Option(None, help="Model id reported by /v1/models (default: the path)."),
    max_batch_size: int = typer.Option(64, help="Most requests decoded together."),
    threads: int = typer.Option(1, help="torch CPU threads (one is often fastest on a busy machine)."),
    seed: int = typer.Option(0, help="Seed of requests that bring none."),
    episode: bool = typer.Option(
        True,
        "--episode/--no-episode",
        help="Serve an export as it was trained: its rockroll_episode.json sets the chat defaults (system "
        "message, max_tokens, temperature); --no-episode: OpenAI's defaults, messages as sent.",
    ),
    tool_call_parser: str | None = typer.Option(
        None,
        "--tool-call-parser",
        help="Style the model writes tool calls in (hermes, llama3_json, mistral), for requests with tools; "
        "default: the one a run's export records (rollout.episode.tool_call_parser), else hermes.",
        show_default=False,
    ),
    api_key: str = typer.Option(
        "",
        "--api-key",
        envvar="ROCKROLL_MODEL_API_KEY",
        help="Key every request but /health must send (Authorization: Bearer KEY); empty: none.",
        show_default=False,
    ),
) -> None:
    """Serve a model over an OpenAI-compatible API (/v1/completions, /v1/chat/completions, /v1/models).

    Streaming, stop strings, n, logprobs/top_logprobs, max_tokens, seed and tools (tool_choice,
    tool_calls in answers and streams; see --tool-call-parser) work as OpenAI defines them; errors
    are OpenAI's {"error": ...}. A run's export is served as it was trained (see --episode).
    Without --api-key (or $ROCKROLL_MODEL_API_KEY) anyone who reaches the port may use it: keep it
    on 127.0.0.1.

    Example (then point any OpenAI client at http://127.0.0.1:8001/v1, model "tiny"):

        rockroll model build-tiny /tmp/tiny
        rockroll serve-model /tmp/tiny --model-name tiny --port 8001
    """
    from rockroll.agentrl.serving.app import serve_model

    _check_model_dir(Path(model_path), episode, tool_call_parser)
    if not api_key and host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"warning: serving on {host} without an API key (--api-key): anyone who reaches it may use it")
    serve_model(
        model_path,
        host=host,
        port=port,
        device=device,
        model_name=model_name,
        max_batch_size=max_batch_size,
        num_threads=threads,
        seed=seed,
        use_episode=episode,
        api_key=api_key or None,
        tool_call_parser=tool_call_parser,
    )


def _check_model_dir(path: Path, episode: bool, tool_call_parser: str | None) -> None:
    """What serve-model checks before loading anything: a model directory, its episode file, the tool-call parser."""
    from rockroll.agentrl.serving.episode import load_episode
    from rockroll.agentrl.serving.tool_calls import recorded_parser
    from rockroll.agentrl.tools import TOOL_PARSERS

    if not path.is_dir():
        raise typer.BadParameter(f"no model directory {path}", param_hint="MODEL_PATH")
    if not (path / "config.json").is_file():
        raise typer.BadParameter(
            f"{path} is not a Hugging Face model directory (no config.json); build one with "
            "`rockroll model build-tiny DIR` or export a run with `rockroll export RUN`",
            param_hint="MODEL_PATH",
        )
    try:
        load_episode(path) if episode else None
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="MODEL_PATH") from e
    parser = tool_call_parser or recorded_parser(path)
    if parser is not None and parser not in TOOL_PARSERS:
        where = "" if tool_call_parser else f" (recorded by the export {path})"
        raise typer.BadParameter(
            f"unknown tool-call parser {parser!r}{where}: one of {', '.join(TOOL_PARSERS)}",
            param_hint="--tool-call-parser",
        )
