"""``rockroll envs ...``, ``rockroll play`` and ``rockroll demo``: browse and play the registry."""

from __future__ import annotations

import json
import sys
import time

import typer
from rich.console import Console
from rich.table import Table

import rockroll.envhub as envhub
from rockroll.envs.play import POLICIES, play_episode

__all__ = ["envs_app", "play", "demo"]

envs_app = typer.Typer(help="Browse the env registry.", no_args_is_help=True)
console = Console(width=None if sys.stdout.isatty() else 140)


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
def list_envs(tag: str | None = typer.Option(None, help="Only envs with this tag.")) -> None:  # noqa: UP007
    """List registered envs."""
    table = Table("id", "max_steps", "tags", "description")
    for s in envhub.list_envs(tag):
        table.add_row(s.id, str(s.max_steps), ", ".join(s.tags), s.description)
    console.print(table)


@envs_app.command("show")
def show_env(env_id: str, kwargs: list[str] = typer.Argument(None, help="key=value constructor args")) -> None:
    """Show an env's spec, system prompt and first observation."""
    try:
        spec = envhub.spec(env_id)
        env = envhub.make(env_id, **_parse_kwargs(kwargs or []))
    except (LookupError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e
    obs, _ = env.reset(seed=0)
    console.print(f"[bold]{spec.id}[/bold] ({spec.entry_point}) max_steps={spec.max_steps} kwargs={spec.kwargs}")
    console.print(f"[bold]system prompt[/bold]\n{env.system_prompt()}\n\n[bold]observation (seed 0)[/bold]\n{obs}")


def play(
    env_id: str,
    kwargs: list[str] = typer.Argument(None, help="key=value constructor args"),
    policy: str = typer.Option("expert", help="random | expert"),
    seed: int = typer.Option(0, help="Episode seed."),
) -> None:
    """Play one episode and print every step."""
    try:
        env = envhub.make(env_id, **_parse_kwargs(kwargs or []))
        obs, _ = env.reset(seed=seed)
        console.print(obs)

        def show(action: str, obs: str, reward: float) -> None:
            console.print(f"[cyan]{action}[/cyan]  reward={reward:+.2f}\n{obs}")

        res = play_episode(env, policy, seed, on_step=show)
    except (LookupError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e
    console.print(f"steps={res.steps} return={res.total_reward:+.2f} success={res.success}")


def demo(
    episodes: int = typer.Option(50, help="Episodes per env and policy."),
) -> None:
    """Scripted demo: random vs expert play on the built-in grid envs, one episode shown."""
    cases = [
        ("FrozenLake-v0", {"is_slippery": False}),
        ("FrozenLake-v0", {}),
        ("SimpleSokoban-v0", {}),
        ("LargerSokoban-v0", {}),
    ]
    env = envhub.make("FrozenLake-v0", is_slippery=False)
    console.print(f"[bold]System prompt[/bold]\n{env.system_prompt()}\n")
    shown = play_episode(env, "expert", 7, record=True)
    console.print("[bold]Expert episode on FrozenLake-v0 (seed 7)[/bold]")
    for frame in shown.frames:
        console.print(frame + "\n")
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
                json.dumps(kw),
                policy,
                f"{sum(r.success for r in results) / episodes:.0%}",
                f"{sum(r.total_reward for r in results) / episodes:+.2f}",
                f"{steps / episodes:.1f}",
                f"{steps / dt:,.0f}",
            )
    console.print(table)
