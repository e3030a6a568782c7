"""``rockroll play`` and ``rockroll envs show``: env text printed verbatim, bare actions for plain gymnasium envs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.api.test_cli_errors import ROOT, rockroll


def test_play_webshop_keeps_brackets() -> None:
    out = rockroll("play", "WebShop-v0", "--policy", "expert", "--seed", "0")
    assert out.returncode == 0, out
    assert "[Search] Type a query" in out.stdout and "search[<your query>]" in out.stdout
    assert "click[back to search], click[next >]" in out.stdout  # lowercase: what Rich ate as markup
    assert "<answer>search[" in out.stdout  # WebShop parses answers: the action is wrapped


def test_envs_show_keeps_brackets() -> None:
    out = rockroll("envs", "show", "WebShop-v0")
    assert out.returncode == 0, out
    assert "search[the product you want]" in out.stdout and "parses_answer=True" in out.stdout


BARE_ENV = '''
import gymnasium as gym


class EchoEnv(gym.Env):
    """A plain gymnasium env: takes the action text as is and never ends on its own."""

    def __init__(self):
        self.action_space = gym.spaces.Text(min_length=1, max_length=3, charset="lr")
        self.observation_space = gym.spaces.Text(max_length=100)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "[start] say l or r", {}

    def step(self, action):
        bare = "<" not in action
        return f"got {action!r} [bare={bare}]", float(bare), False, False, {}
'''


def test_play_sends_bare_actions_to_an_env_that_does_not_parse_answers(tmp_path: Path) -> None:
    (tmp_path / "echo_env.py").write_text(textwrap.dedent(BARE_ENV))
    script = (
        "import rockroll.envhub as hub\n"
        "from rockroll.cli.main import main\n"
        "hub.register('Echo-v0', 'echo_env:EchoEnv', max_steps=3, parses_answer=False)\n"
        "main(['play', 'Echo-v0', '--policy', 'random', '--seed', '1'])\n"
    )
    env = {"PYTHONPATH": str(tmp_path), "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 0, out
    assert out.stdout.count("[bare=True]") == 3 and "<answer>" not in out.stdout
    assert "[start] say l or r" in out.stdout
    assert "steps=3 return=+3.00" in out.stdout  # MaxSteps truncated the never-ending episode at 3
