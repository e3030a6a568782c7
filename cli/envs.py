"""``rockroll envs ...``, ``rockroll play`` and ``rockroll demo``: browse and play the registry.

Env text (observations, prompts, actions) is printed as is: ``[Search]`` stays ``[Search]``, never
read as Rich markup.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, NoReturn

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

import rockroll.envhub as envhub
from rockroll.envs.experts import expert_for
from rockroll.envs.play import POLICIES, call_text, is_tool_env, play_episode, random_tool_turn
from rockroll.envs.tool_env import render_results
from rockroll.envs.tools import ToolAction, ToolResult

__all__ = ["envs_app", "play", "demo", "fail"]

envs_app = typer.Typer(help="Browse the env registry.", no_args_is_help=True)
console = Console(width=None if sys.stdout.isatty() else 140)


def fail(message: str, code: int = 2, cause: BaseException | None = None) -> NoReturn:
    """End the command: ``error: message`` on stderr and exit ``code`` (``rockroll --debug`` shows ``cause``)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code) from cause


def _say(text: Any) -> None:
    """Print env text verbatim (no markup, no highlighting)."""
    console.print(str(text), markup=False, highlight=False, soft_wrap=True)


def _text(v: Any) -> str:
    return ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else "" if v is None else str(v)


def _parse_kwargs(items: list[str]) -> dict:
    """``key=value`` pairs; values are read as JSON when they parse, else as strings."""
    out: dict = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected key=value, got {item!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


@envs_app.command("list")
def list_envs(
    tag: str | None = typer.Option(None, help="Only envs with this tag."),  # noqa: UP007
    url: str | None = typer.Option(
        None, "--url", envvar="ROCKROLL_URL", help="Also list the envs of this control plane (custom ones: owner/Name)."
    ),
    token: str = typer.Option("", "--token", envvar="ROCKROLL_TOKEN", help="Bearer token of --url."),
) -> None:
    """List registered envs: this machine's, and a control plane's with --url (or $ROCKROLL_URL).

    Example: rockroll envs list --tag grid
    """
    from rockroll.cli.remote import _run
    from rockroll.cli.tables import print_table

    cols = ["id", "max_steps", "tags", "description"]
    rows = [[s.id, str(s.max_steps), ", ".join(s.tags), s.description] for s in envhub.list_envs(tag)]
    if url:
        console.print("this machine:", markup=False, highlight=False)
    print_table(console, cols, rows)
    if url:
        remote = [e for e in _run(url, token, lambda c: c.list_envs(tag)) if not e.get("builtin")]
        title = "custom envs" if remote else "no custom envs"
        console.print(f"{title} on {url} (play: `rockroll session create ID`):", markup=False, highlight=False)
        print_table(
            console, ["id", "owner", *cols[1:]], [[_text(e.get(c)) for c in ["id", "owner", *cols[1:]]] for e in remote]
        )


@envs_app.command("show")
def show_env(env_id: str, kwargs: list[str] = typer.Argument(None, help="key=value constructor args")) -> None:
    """Show an env's spec, system prompt and first observation.

    Example: rockroll envs show WebShop-v0
    """
    spec = envhub.spec(env_id)
    env = envhub.make(env_id, **_parse_kwargs(kwargs or []))
    obs, _ = env.reset(seed=0)
    console.print(
        f"[bold]{escape(spec.id)}[/bold] ({escape(str(spec.entry_point))}) max_steps={spec.max_steps} "
        f"parses_answer={spec.parses_answer} kwargs={escape(str(spec.kwargs))}"
    )
    console.print("[bold]system prompt[/bold]")
    _say(env.system_prompt() if hasattr(env, "system_prompt") else "")
    console.print("\n[bold]observation (seed 0)[/bold]")
    _say(obs)


def _random_move(env: Any, rng: np.random.Generator) -> str | ToolAction | None:
    """A tool env's random turn (:func:`~rockroll.envs.play.random_tool_turn`), else a uniform pick among
    ``action_candidates()``, else a sample of the action space."""
    if is_tool_env(env):
        return random_tool_turn(env, rng)
    candidates = getattr(env, "action_candidates", None)
    if callable(candidates):
        found = candidates()
        return str(rng.choice(found)) if found else None
    return str(env.action_space.sample())


def _show_step(action: str | ToolAction, reward: float, obs: str, info: Any) -> None:
    """Print one step: a text action as sent; a tool turn's text and each call as ``name(arguments-json)``
    with its result; then the observation (unless it only repeats the results)."""
    score = f"  reward={reward:+.2f}"
    if isinstance(action, str):
        console.print(Text.assemble((action, "cyan"), score))
        _say(obs)
        return
    raw = info.get("tool_results", []) if isinstance(info, dict) else []
    results = [ToolResult(r["tool_call_id"], r["name"], r["content"], bool(r["error"])) for r in raw]
    if action.text or not action.calls:
        text = action.text or "(an empty turn)"
        console.print(Text.assemble((text, "cyan"), "" if action.calls else f"  (no call){score}"))
    for i, call in enumerate(action.calls):
        line = Text.assemble((call_text(call), "cyan"), score if i == 0 else "")
        if i < len(results):
            line.append(f"\n  -> {'error: ' if results[i].error else ''}{results[i].content}")
        console.print(line, soft_wrap=True)
    if obs != render_results(results):
        _say(obs)


def play(
    env_id: str,
    kwargs: list[str] = typer.Argument(None, help="key=value constructor args"),
    policy: str = typer.Option("expert", help="random | expert"),
    seed: int = typer.Option(0, help="Episode seed."),
) -> None:
    """Play one episode and print every step.

    Actions go in <answer>...</answer> for envs that parse answers (every built-in env); an env
    registered with parses_answer=False gets them bare. A tool env (Lookup-v0) takes tool-calling turns:
    each call is printed as name(arguments-json) with its result.

    Example: rockroll play FrozenLake-v0 is_slippery=false --policy random --seed 3
    """
    if policy not in POLICIES:
        raise typer.BadParameter(f"must be one of {', '.join(POLICIES)}, got {policy!r}", param_hint="--policy")
    spec = envhub.spec(env_id)
    env = envhub.make(env_id, **_parse_kwargs(kwargs or []))
    obs, _ = env.reset(seed=seed)
    _say(obs)
    env.action_space.seed(seed)
    rng = np.random.default_rng(seed)
    try:
        expert = expert_for(env) if policy == "expert" else None
    except LookupError as e:
        fail(f"{e}; try --policy random", 2, e)
    steps, total, success = 0, 0.0, False
    while True:
        move = expert() if expert is not None else _random_move(env, rng)
        action = move if isinstance(move, ToolAction) else spec.format_action(move or "")
        obs, reward, terminated, truncated, info = env.step(action)
        steps, total = steps + 1, total + float(reward)
        success = bool(info.get("success", success)) if isinstance(info, dict) else success
        _show_step(action, float(reward), obs, info)
        if terminated or truncated:
            break
    console.print(f"steps={steps} return={total:+.2f} success={success}")


def demo(
    episodes: int = typer.Option(50, help="Episodes per env and policy."),
) -> None:
    """Scripted demo: random vs expert play on the built-in grid envs, one episode shown.

    Example: rockroll demo --episodes 10
    """
    cases = [
        ("FrozenLake-v0", {"is_slippery": False}),
        ("FrozenLake-v0", {}),
        ("SimpleSokoban-v0", {}),
        ("LargerSokoban-v0", {}),
    ]
    env = envhub.make("FrozenLake-v0", is_slippery=False)
    console.print("[bold]System prompt[/bold]")
    _say(env.system_prompt() + "\n")
    shown = play_episode(env, "expert", 7, record=True)
    console.print("[bold]Expert episode on FrozenLake-v0 (seed 7)[/bold]")
    for frame in shown.frames:
        _say(frame + "\n")
    table = Table("env", "kwargs", "policy", "success", "mean return", "mean steps", "steps/s")
    for env_id, kw in cases:
        env = envhub.make(env_id, **kw)
        for policy in POLICIES:
            t0 = time.perf_counter()
            results = [play_episode(env, policy, seed) for seed in range(episodes)]
            dt = time.perf_counter() - t0
            steps = sum(r.steps for r in results)
            table.add_row(
                env_id,
                Text(json.dumps(kw)),
                policy,
                f"{sum(r.success for r in results) / episodes:.0%}",
                f"{sum(r.total_reward for r in results) / episodes:+.2f}",
                f"{steps / episodes:.1f}",
                f"{steps / dt:,.0f}",
            )
    console.print(table)
