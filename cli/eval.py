"""``rockroll eval``: evaluate a model on envs, from a YAML config or directly on a model directory.

Two forms::

    rockroll eval CONFIG.yaml [key=value ...]            # see rockroll.agentrl.eval.config
    rockroll eval --model DIR --env FrozenLake-v0 --env-kwargs is_slippery=true --seeds 5000:5500 \\
        [--temperature 0] [--max-turns N] [--history-k K] [--json report.json] [key=value ...]

The direct form plays one multi-turn episode per seed (one action per turn, the env answering) with
the ``hf`` engine on DIR (a Hugging Face directory, e.g. ``runs/NAME/export/final``), envs in this
process; an env registered on a control plane (``--env alice/Nim-v0``) plays through its sessions
(``--url``, default ``$ROCKROLL_URL`` for an env not registered here, and ``--token``/``$ROCKROLL_TOKEN``). ``--seeds`` takes ``A:B`` (A, A+1, ..., B-1), ``N`` or a comma list of both. ``key=value``
overrides apply to the config either way (``episode.observation_format=cells``). ``--json PATH``
writes the whole report: summary, per-env/per-tag rows and one record per episode (seed, success,
turns, reward, ...). Bad input is one line on stderr and exit status 2.

Mounted in :mod:`rockroll.cli.main` with ``app.add_typer(eval_app, name="eval")``. Heavy imports happen
inside the command, so ``rockroll --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from rockroll.envs.errors import RockrollError

__all__ = ["eval_app"]

eval_app = typer.Typer(  # its help is the command's docstring (with examples)
    context_settings={"allow_interspersed_args": True},  # options may follow CONFIG
)


#: after "No env registered as ..." of the direct form without a server
_SERVER_HINT = " An env registered on a server plays through it: add --url URL (or set ROCKROLL_URL) and --token."


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


@contextlib.contextmanager
def _server_env(env: str | None, url: str | None, token: str | None) -> Iterator[tuple[Any, Any]]:
    """``(source, the server's view of env)`` when the direct form's env plays on a control plane (``--url``, or
    ``$ROCKROLL_URL`` for an env not registered here), else ``(None, None)``; the client closes on exit."""
    import rockroll.envhub as envhub

    if env is not None and not url:
        try:
            envhub.spec(env)
        except (envhub.UnknownEnvError, envhub.RegistrationError):
            url = os.environ.get("ROCKROLL_URL") or None
    if env is None or not url:
        yield None, None
        return
    from rockroll.agentrl.sources.remote import RemoteSource
    from rockroll.client.sdk import Client

    with Client(url, token or None) as client:
        source = RemoteSource(client)
        try:
            view = source.describe(env)
        except LookupError as e:
            raise _fail(f"{e} (on {url}; `rockroll remote-env list` shows the ids you may use)") from e
        yield source, view


@eval_app.callback(invoke_without_command=True)
def eval_cmd(
    config: str | None = typer.Argument(
        None, help="YAML eval config (see agentrl.eval.config); omit it with --model.", show_default=False
    ),
    overrides: list[str] | None = typer.Argument(None, help="key=value overrides, e.g. concurrency=4 seed=7."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Report folder (overrides output_dir of the config)."),
    episodes: int | None = typer.Option(None, min=1, help="Episodes per env (overrides every entry without seeds)."),
    progress: bool = typer.Option(True, help="Show a progress bar on stderr."),
    model: Path | None = typer.Option(None, "--model", help="Direct form: a Hugging Face model directory."),
    env: str | None = typer.Option(None, "--env", help="Direct form: env id, e.g. FrozenLake-v0."),
    env_kwargs: list[str] | None = typer.Option(
        None, "--env-kwargs", help="Direct form: one env kwarg key=value (repeat it), e.g. is_slippery=true."
    ),
    seeds: str | None = typer.Option(
        None, "--seeds", help="Direct form: env seeds, one episode each: A:B (A..B-1), N, or a comma list."
    ),
    temperature: float = typer.Option(0.0, "--temperature", help="Direct form: sampling temperature (0: greedy)."),
    max_turns: int | None = typer.Option(
        None, "--max-turns", help="Direct form: turns per episode (default: env's limit)."
    ),
    max_tokens_per_turn: int | None = typer.Option(
        None, "--max-tokens-per-turn", help="Direct form: response budget of one turn (default 64)."
    ),
    history_k: int | None = typer.Option(
        None, "--history-k", help="Direct form: keep only the last K exchanges in the prompt (default: full history)."
    ),
    device: str = typer.Option("cpu", "--device", help="Direct form: torch device of the model (cpu, cuda, ...)."),
    threads: int | None = typer.Option(None, "--threads", help="Direct form: torch CPU threads."),
    concurrency: int = typer.Option(16, "--concurrency", help="Direct form: episodes played at once."),
    json_path: Path | None = typer.Option(
        None, "--json", help="Write the report (summary + one record per episode) as JSON to this file."
    ),
    url: str | None = typer.Option(
        None,
        "--url",
        help="Direct form: play the env through this control plane's sessions (default: "
        "$ROCKROLL_URL when the env is not registered here).",
        show_default=False,
    ),
    token: str | None = typer.Option(
        None, "--token", envvar="ROCKROLL_TOKEN", help="Direct form: API token for --url.", show_default=False
    ),
) -> None:
    """Evaluate a model (any engine) on env ids or tags; print the report (Markdown), write JSON.

    Give a CONFIG (YAML, see agentrl.eval.config) or the direct form --model DIR --env ID --seeds A:B.
    Exits 0 when every episode finished, 1 when some failed (they are in the report, masked, with
    the reason), 2 on bad input.

    Examples:

        rockroll eval --model runs/demo/export/final --env FrozenLake-v0 --seeds 5000:5100 --json report.json
        rockroll eval eval.yaml concurrency=4 episode.temperature=0.7 --out eval-out
    """
    overrides = list(overrides or [])
    if config is not None and "=" in config and not Path(config).is_file():  # `rockroll eval --model D k=v`
        config, overrides = None, [config, *overrides]
    direct = model is not None or env is not None or seeds is not None
    opts = {
        "env_kwargs": env_kwargs, "temperature": temperature, "max_turns": max_turns,
        "max_tokens_per_turn": max_tokens_per_turn, "history_k": history_k, "device": device, "threads": threads,
        "concurrency": concurrency,
    }  # fmt: skip
    _check_form(config, direct, opts, url)
    with _server_env(env if direct else None, url, token) as (source, view):
        cfg = _load_config(config, overrides, (model, env, seeds) if direct else None, opts, source, view)
        if out is not None:
            cfg.output_dir = str(out)
        if episodes is not None:
            for entry in cfg.envs:
                entry.episodes = episodes
        if source is not None:  # the report says where the envs ran
            cfg.source = cfg.source.model_copy(update={"kind": "remote", "url": source.client.url})
        _play(cfg, source, progress, json_path)


def _check_form(config: str | None, direct: bool, opts: dict[str, Any], url: str | None) -> None:
    """Refuse a CONFIG together with the direct form, or direct-form options (``opts``, ``--url``) without it."""
    if config is not None and direct:
        raise _fail("give either CONFIG or --model/--env/--seeds, not both")
    set_flags = {
        "--env-kwargs": bool(opts["env_kwargs"]), "--temperature": opts["temperature"] != 0.0,
        "--max-turns": opts["max_turns"] is not None, "--max-tokens-per-turn": opts["max_tokens_per_turn"] is not None,
        "--history-k": opts["history_k"] is not None, "--device": opts["device"] != "cpu",
        "--threads": opts["threads"] is not None, "--concurrency": opts["concurrency"] != 16, "--url": url is not None,
    }  # fmt: skip
    if not direct and any(set_flags.values()):
        flags = ", ".join(f for f, on in set_flags.items() if on)
        raise _fail(
            f"{flags} belong to the direct form (--model DIR --env ID --seeds A:B); with a CONFIG use key=value"
        )


def _load_config(
    config: str | None,
    overrides: list[str],
    direct: tuple[Path | None, str | None, str | None] | None,
    opts: dict[str, Any],
    source: Any,
    view: Any,
) -> Any:
    """The eval config: CONFIG with ``overrides``, or the direct form's (``direct``: ``(model, env, seeds)``,
    ``opts``: its other options); bad input exits 2 with one line."""
    from rockroll.agentrl.eval.config import load_eval_config, model_eval_config, parse_env_kwargs, parse_seeds

    try:
        if config is not None:
            return load_eval_config(config, overrides)
        if direct is not None:
            model, env, seeds = direct
            missing = [flag for flag, v in (("--model", model), ("--env", env), ("--seeds", seeds)) if v is None]
            if missing:
                raise ValueError(f"the direct form needs {', '.join(missing)} (e.g. --seeds 5000:5100)")
            return model_eval_config(
                model, env, parse_seeds(seeds), env_kwargs=parse_env_kwargs(opts["env_kwargs"] or []),
                temperature=opts["temperature"], max_turns=opts["max_turns"],
                max_tokens_per_turn=opts["max_tokens_per_turn"], history_k=opts["history_k"], device=opts["device"],
                threads=opts["threads"], concurrency=opts["concurrency"], overrides=overrides, env_view=view,
            )  # fmt: skip
        raise ValueError("give a CONFIG file, or --model DIR --env ID --seeds A:B (see rockroll eval --help)")
    except (ValueError, TypeError, LookupError, OSError) as e:
        where = f"invalid eval config {config}: " if config is not None else ""
        hint = "" if source is not None or not isinstance(e, LookupError) else _SERVER_HINT
        raise _fail(where + str(e).replace("\n", " ") + hint) from e


def _play(cfg: Any, source: Any, progress: bool, json_path: Path | None) -> None:
    """Start the engine, play every episode, print the report (and write it); exit 1 when episodes failed."""
    from rockroll.agentrl.eval.run import build_engine, run_eval

    try:
        engine = build_engine(cfg.engine)
    except Exception as e:  # whatever the loader raises (corrupt weights, bad args): one line
        raise _fail(f"cannot start the {cfg.engine.kind} engine: {_first_line(e)}", 1) from e
    try:  # the engine is closed inside run_eval's event loop (its HTTP clients belong to it)
        report = run_eval(cfg, engine=engine, source=source, progress=progress, close_engine=True)
    except RockrollError as e:  # the env source could not start (a sandbox backend missing, ...)
        raise _fail(_first_line(e), 1) from e
    typer.echo(report.to_markdown())
    if cfg.output_dir:
        typer.echo(f"report written to {cfg.output_dir}/report.json and report.md")
    if json_path is not None:
        typer.echo(f"report written to {report.write_json(json_path)}")
    failed = [e for e in report.episodes if e["masked"]]
    if failed:  # the report holds them (masked, with their failure); the run was not clean
        first = failed[0]
        raise _fail(
            f"{len(failed)} of {len(report.episodes)} episodes failed and are masked in the report "
            f"(first: {first['env']} seed {first['seed']}: {first['failure']})",
            1,
        )
